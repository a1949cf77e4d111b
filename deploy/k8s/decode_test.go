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
}

// agentSandbox mirrors the fields of kubernetes-sigs/agent-sandbox's
// Sandbox (api/v1beta1/sandbox_types.go at v0.5.6), which is not imported
// so that its controller-runtime dependencies stay out: the pod spec in it
// is the core [corev1.PodSpec]. Its pod metadata holds only labels and
// annotations, as there, which is stricter than
// [corev1.PodTemplateSpec]: a field the CRD's schema lacks fails here too.
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
func loadManifests(dir string) (*manifests, error) {
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
	}
	return m, nil
}
