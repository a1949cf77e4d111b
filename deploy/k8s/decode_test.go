package k8s

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The kinds a manifest here may hold, by apiVersion and kind, each with
// the type its documents decode into. Any other kind fails the test.
var kinds = map[string]func() any{
	"v1/Pod":                             func() any { return new(corev1.Pod) },
	"v1/Secret":                          func() any { return new(corev1.Secret) },
	"networking.k8s.io/v1/NetworkPolicy": func() any { return new(networkingv1.NetworkPolicy) },
	"agents.x-k8s.io/v1beta1/Sandbox":    func() any { return new(agentSandbox) },
	"extensions.agents.x-k8s.io/v1beta1/SandboxTemplate": func() any { return new(agentSandboxTemplate) },
	"extensions.agents.x-k8s.io/v1beta1/SandboxWarmPool": func() any { return new(agentWarmPool) },
	"extensions.agents.x-k8s.io/v1beta1/SandboxClaim":    func() any { return new(agentClaim) },
}

// agentSandbox mirrors the fields of kubernetes-sigs/agent-sandbox's
// Sandbox (api/v1beta1/sandbox_types.go at v0.5.6), which is not imported
// so that its controller-runtime dependencies stay out (and it needs a
// newer Kubernetes): the pod spec in it is the core [corev1.PodSpec]. Its
// pod metadata holds only labels and annotations, as there, which is
// stricter than [corev1.PodTemplateSpec]. The mirrors give the checks
// typed objects; what a manifest of agent-sandbox may hold is decided by
// the CRD's schema (validateCRD), which decodeStrict checks first.
type agentSandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              agentSandboxSpec `json:"spec"`
}

type agentSandboxSpec struct {
	PodTemplate          agentPodTemplate     `json:"podTemplate"`
	VolumeClaimTemplates []agentClaimTemplate `json:"volumeClaimTemplates,omitempty"`
	Service              *bool                `json:"service,omitempty"`
	ShutdownTime         *metav1.Time         `json:"shutdownTime,omitempty"`
	ShutdownPolicy       *string              `json:"shutdownPolicy,omitempty"`
	OperatingMode        string               `json:"operatingMode,omitempty"`
}

// agentSandboxTemplate mirrors agent-sandbox's SandboxTemplate
// (extensions/api/v1beta1/sandboxtemplate_types.go at v0.5.6).
type agentSandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              agentTemplateSpec `json:"spec"`
}

type agentTemplateSpec struct {
	PodTemplate                agentPodTemplate        `json:"podTemplate"`
	VolumeClaimTemplates       []agentClaimTemplate    `json:"volumeClaimTemplates,omitempty"`
	Service                    *bool                   `json:"service,omitempty"`
	NetworkPolicy              *agentNetworkPolicySpec `json:"networkPolicy,omitempty"`
	NetworkPolicyManagement    string                  `json:"networkPolicyManagement,omitempty"`
	EnvVarsInjectionPolicy     string                  `json:"envVarsInjectionPolicy,omitempty"`
	VolumeClaimTemplatesPolicy string                  `json:"volumeClaimTemplatesPolicy,omitempty"`
}

// agentNetworkPolicySpec is the template's network policy: the rules of
// a NetworkPolicy, whose selector and policy types (both) the controller
// sets.
type agentNetworkPolicySpec struct {
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress  []networkingv1.NetworkPolicyEgressRule  `json:"egress,omitempty"`
}

// agentWarmPool mirrors agent-sandbox's SandboxWarmPool
// (extensions/api/v1beta1/sandboxwarmpool_types.go at v0.5.6), without
// its status.
type agentWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Replicas           *int32 `json:"replicas,omitempty"`
		SandboxTemplateRef struct {
			Name string `json:"name"`
		} `json:"sandboxTemplateRef"`
		UpdateStrategy *struct {
			Type string `json:"type,omitempty"`
		} `json:"updateStrategy,omitempty"`
	} `json:"spec"`
}

// agentClaim mirrors agent-sandbox's SandboxClaim
// (extensions/api/v1beta1/sandboxclaim_types.go at v0.5.6), without its
// status.
type agentClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		WarmPoolRef struct {
			Name string `json:"name"`
		} `json:"warmPoolRef"`
		Lifecycle *struct {
			ShutdownTime            *metav1.Time `json:"shutdownTime,omitempty"`
			TTLSecondsAfterFinished *int32       `json:"ttlSecondsAfterFinished,omitempty"`
			ShutdownPolicy          string       `json:"shutdownPolicy,omitempty"`
		} `json:"lifecycle,omitempty"`
		AdditionalPodMetadata agentPodMetadata `json:"additionalPodMetadata,omitempty"`
		Env                   []struct {
			Name          string `json:"name"`
			Value         string `json:"value"`
			ContainerName string `json:"containerName,omitempty"`
		} `json:"env,omitempty"`
		VolumeClaimTemplates []agentClaimTemplate `json:"volumeClaimTemplates,omitempty"`
	} `json:"spec"`
}

type agentPodTemplate struct {
	Metadata agentPodMetadata `json:"metadata"`
	Spec     corev1.PodSpec   `json:"spec"`
}

type agentPodMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type agentClaimTemplate struct {
	Metadata struct {
		Name        string            `json:"name,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// podTemplateSpec is the Sandbox's pod as the core type.
func (s *agentSandbox) podTemplateSpec() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      s.Spec.PodTemplate.Metadata.Labels,
			Annotations: s.Spec.PodTemplate.Metadata.Annotations,
		},
		Spec: s.Spec.PodTemplate.Spec,
	}
}

// document is one decoded YAML document of a manifest.
type document struct {
	where string // file:index
	obj   any    // one of the types in kinds
}

// decodeStrict decodes every document in data into the type of its kind.
// It fails, as the API server's strict field validation does, on a field
// the type does not have, on a field spelt in another case (encoding/json
// would accept it), and on a key given twice; and on a kind not in kinds.
// A document of agent-sandbox's (apiVersion *.agents.x-k8s.io) must first
// pass its CRD's schema, closed to unknown fields (validateCRD).
func decodeStrict(name string, data []byte) ([]document, error) {
	var docs []document
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		where := fmt.Sprintf("%s: document %d", name, i)
		if err != nil {
			return nil, fmt.Errorf("%s: reading: %w", where, err)
		}
		j, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue // comments only
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		key := tm.APIVersion + "/" + tm.Kind
		newObj, ok := kinds[key]
		if !ok {
			return nil, fmt.Errorf("%s: unknown kind %q (apiVersion %q): this test knows %s",
				where, tm.Kind, tm.APIVersion, knownKinds())
		}
		if isCRDKind(tm.APIVersion) {
			if err := validateCRD(tm.APIVersion, tm.Kind, j); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		obj := newObj()
		strictErrs, err := kjson.UnmarshalStrict(j, obj)
		if err != nil {
			return nil, fmt.Errorf("%s: decoding %s: %w", where, key, err)
		}
		if len(strictErrs) > 0 {
			return nil, fmt.Errorf("%s: decoding %s: %w", where, key, errors.Join(strictErrs...))
		}
		docs = append(docs, document{where: where, obj: obj})
	}
}

func knownKinds() string {
	return strings.Join(slices.Sorted(maps.Keys(kinds)), ", ")
}

// manifests is every manifest in this directory, decoded.
type manifests struct {
	pod     *corev1.Pod
	secret  *corev1.Secret
	policy  *networkingv1.NetworkPolicy
	sandbox *agentSandbox
	// agent-sandbox's extensions: the pool of sidecar pods.
	template *agentSandboxTemplate
	pool     *agentWarmPool
	claim    *agentClaim
}

// manifestFiles lists the YAML files under dir.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return fs.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// loadManifests decodes every manifest under dir; each kind must appear
// once.
func loadManifests(dir string) (*manifests, error) { return loadManifestsWith(dir, nil) }

// loadManifestsWith is loadManifests with the contents of some files
// (by path, as found under dir) replaced: a test changes a manifest.
func loadManifestsWith(dir string, replace map[string]string) (*manifests, error) {
	files, err := manifestFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no manifests under %s", dir)
	}
	m := &manifests{}
	seen := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if r, ok := replace[f]; ok {
			data = []byte(r)
		}
		docs, err := decodeStrict(f, data)
		if err != nil {
			return nil, err
		}
		if len(docs) == 0 {
			return nil, fmt.Errorf("%s: no document", f)
		}
		for _, d := range docs {
			kind := fmt.Sprintf("%T", d.obj)
			if prev, ok := seen[kind]; ok {
				return nil, fmt.Errorf("%s: a second %s (the first is %s): the checks expect one of each", d.where, kind, prev)
			}
			seen[kind] = d.where
			switch o := d.obj.(type) {
			case *corev1.Pod:
				m.pod = o
			case *corev1.Secret:
				m.secret = o
			case *networkingv1.NetworkPolicy:
				m.policy = o
			case *agentSandbox:
				m.sandbox = o
			case *agentSandboxTemplate:
				m.template = o
			case *agentWarmPool:
				m.pool = o
			case *agentClaim:
				m.claim = o
			}
		}
	}
	switch {
	case m.pod == nil:
		return nil, errors.New("no Pod manifest")
	case m.secret == nil:
		return nil, errors.New("no Secret manifest (the token)")
	case m.policy == nil:
		return nil, errors.New("no NetworkPolicy manifest")
	case m.sandbox == nil:
		return nil, errors.New("no agent-sandbox Sandbox manifest")
	case m.template == nil:
		return nil, errors.New("no agent-sandbox SandboxTemplate manifest")
	case m.pool == nil:
		return nil, errors.New("no agent-sandbox SandboxWarmPool manifest")
	case m.claim == nil:
		return nil, errors.New("no agent-sandbox SandboxClaim manifest")
	}
	return m, nil
}
