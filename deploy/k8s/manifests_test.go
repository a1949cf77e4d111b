package k8s

import (
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"
)

func load(t *testing.T) *manifests {
	t.Helper()
	m, err := loadManifests(".")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func report(t *testing.T, what string, p problems) {
	t.Helper()
	for _, s := range p {
		t.Errorf("%s: %s", what, s)
	}
}

// TestManifestsDecodeStrictly decodes every manifest here into its
// Kubernetes type, refusing unknown fields and kinds, after checking
// agent-sandbox's kinds against their CRDs' schemas.
func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	t.Logf("Pod %s, Secret %s, NetworkPolicy %s, Sandbox %s, SandboxTemplate %s, SandboxWarmPool %s, SandboxClaim %s",
		m.pod.Name, m.secret.Name, m.policy.Name, m.sandbox.Name, m.template.Name, m.pool.Name, m.claim.Name)
}

// podSources are the pod specs of the sidecar topology in the manifests,
// by the kind that holds them: every pod check runs on each.
var podSources = []struct {
	name string
	spec func(m *manifests) *corev1.PodSpec
}{
	{"Pod", func(m *manifests) *corev1.PodSpec { return &m.pod.Spec }},
	{"Sandbox", func(m *manifests) *corev1.PodSpec { return &m.sandbox.Spec.PodTemplate.Spec }},
	{"SandboxTemplate", func(m *manifests) *corev1.PodSpec { return &m.template.Spec.PodTemplate.Spec }},
}

func TestPodSecurity(t *testing.T) {
	m := load(t)
	for _, src := range podSources {
		report(t, src.name, checkPodSpec(src.spec(m), m.secret.Name))
	}
}

// TestSandboxMatchesPod: the agent-sandbox Sandbox carries pod.yaml's pod,
// and so does the SandboxTemplate, under gVisor.
func TestSandboxMatchesPod(t *testing.T) {
	m := load(t)
	pt := m.sandbox.podTemplateSpec()
	if !equality.Semantic.DeepEqual(pt.Spec, m.pod.Spec) {
		t.Errorf("sandbox.yaml's spec.podTemplate.spec differs from pod.yaml's spec (-sandbox +pod):\n%s", diff.Diff(pt.Spec, m.pod.Spec))
	}
	if !equality.Semantic.DeepEqual(pt.Labels, m.pod.Labels) {
		t.Errorf("sandbox.yaml's pod labels %v differ from pod.yaml's %v", pt.Labels, m.pod.Labels)
	}
	if !isTrue(m.sandbox.Spec.Service) {
		t.Errorf("sandbox.yaml: spec.service must be true: the runtime reaches the pod through its headless Service")
	}

	tmpl := m.template.Spec.PodTemplate.Spec.DeepCopy()
	tmpl.RuntimeClassName = m.pod.Spec.RuntimeClassName // checkSandboxTemplate checks it
	if !equality.Semantic.DeepEqual(*tmpl, m.pod.Spec) {
		t.Errorf("sandboxtemplate.yaml's spec.podTemplate.spec differs from pod.yaml's spec but for runtimeClassName (-template +pod):\n%s", diff.Diff(*tmpl, m.pod.Spec))
	}
	if l := m.template.Spec.PodTemplate.Metadata.Labels; !equality.Semantic.DeepEqual(l, m.pod.Labels) {
		t.Errorf("sandboxtemplate.yaml's pod labels %v differ from pod.yaml's %v", l, m.pod.Labels)
	}
	// The template's NetworkPolicy (the controller's) has networkpolicy.yaml's rules.
	if np := m.template.Spec.NetworkPolicy; np == nil ||
		!equality.Semantic.DeepEqual(np.Ingress, m.policy.Spec.Ingress) || !equality.Semantic.DeepEqual(np.Egress, m.policy.Spec.Egress) {
		t.Errorf("sandboxtemplate.yaml's networkPolicy differs from networkpolicy.yaml's ingress and egress rules")
	}
}

func TestNetworkPolicy(t *testing.T) {
	m := load(t)
	report(t, "networkpolicy.yaml", checkNetworkPolicy(m.policy, m.pod.Labels))
	report(t, "networkpolicy.yaml (the Sandbox's pod)", checkNetworkPolicy(m.policy, m.sandbox.Spec.PodTemplate.Metadata.Labels))
	report(t, "networkpolicy.yaml (the SandboxTemplate's pods)", checkNetworkPolicy(m.policy, m.template.Spec.PodTemplate.Metadata.Labels))
}

// TestSandboxTemplate: gVisor, the mailbox in it, the controller's
// NetworkPolicy, nothing a claim may change; the pool and the claim use
// the template as it is.
func TestSandboxTemplate(t *testing.T) {
	m := load(t)
	report(t, "sandboxtemplate.yaml", checkSandboxTemplate(m.template))
	report(t, "sandboxwarmpool.yaml", checkWarmPool(m.pool, m.template))
	report(t, "sandboxclaim.yaml", checkClaim(m.claim, m.pool))
}

func TestTokenSecret(t *testing.T) {
	m := load(t)
	report(t, "token-secret.yaml", checkTokenSecret(m.secret))
}

// TestStrictDecodingRefuses: a manifest with a misspelt field, a field in
// another case, a key given twice, a wrong type, or an unknown kind does
// not decode.
func TestStrictDecodingRefuses(t *testing.T) {
	pod := readFile(t, "pod.yaml")
	sandbox := readFile(t, "sandbox.yaml")
	template := readFile(t, "sandboxtemplate.yaml")
	pool := readFile(t, "sandboxwarmpool.yaml")
	for _, tc := range []struct {
		name, file, doc, want string
	}{
		{"misspelt field", "pod.yaml", replaceOnce(t, pod, "runAsNonRoot: true", "runAsNonRot: true"), `unknown field "spec.initContainers[0].securityContext.runAsNonRot"`},
		{"field in another case", "pod.yaml", replaceOnce(t, pod, "readOnlyRootFilesystem: true", "ReadOnlyRootFilesystem: true"), `unknown field "spec.initContainers[0].securityContext.ReadOnlyRootFilesystem"`},
		// agent-sandbox's kinds: their CRD's schema refuses first.
		{"misspelt field in the Sandbox's pod", "sandbox.yaml", replaceOnce(t, sandbox, "allowPrivilegeEscalation: false", "allowPrivilegeEscalaton: false"), `spec.podTemplate.spec.initContainers[].securityContext: unexpected additional properties ["allowPrivilegeEscalaton"]`},
		{"pod metadata agent-sandbox has not", "sandbox.yaml", replaceOnce(t, sandbox, "  podTemplate:\n    metadata:\n", "  podTemplate:\n    metadata:\n      name: x\n"), `spec.podTemplate.metadata: unexpected additional properties ["name"]`},
		{"misspelt Sandbox field", "sandbox.yaml", replaceOnce(t, sandbox, "  service: true\n", "  services: true\n"), `spec: unexpected additional properties ["services"]`},
		{"misspelt field in the SandboxTemplate's pod", "sandboxtemplate.yaml", replaceOnce(t, template, "      runtimeClassName: gvisor\n", "      runtimeClass: gvisor\n"), `schema of extensions.agents.x-k8s.io/v1beta1/SandboxTemplate (extensions.agents.x-k8s.io_sandboxtemplates.yaml): spec.podTemplate.spec: unexpected additional properties ["runtimeClass"]`},
		{"wrong type in the SandboxTemplate's pod", "sandboxtemplate.yaml", replaceOnce(t, template, "runAsUser: 65532", `runAsUser: "65532"`), `spec.podTemplate.spec.initContainers[].securityContext.runAsUser: type: 65532 has type "string", want "integer"`},
		{"SandboxWarmPool replicas a string", "sandboxwarmpool.yaml", replaceOnce(t, pool, "replicas: 4", `replicas: "4"`), `spec.replicas: type: 4 has type "string", want "integer"`},
		{"an old version of SandboxTemplate", "sandboxtemplate.yaml", replaceOnce(t, template, "extensions.agents.x-k8s.io/v1beta1", "extensions.agents.x-k8s.io/v1alpha1"), `unknown kind "SandboxTemplate" (apiVersion "extensions.agents.x-k8s.io/v1alpha1")`},
		{"duplicate key", "secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n  name: b\n", `"name" already set in map`},
		{"unknown kind", "service.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n", `unknown kind "Service"`},
		{"known kind, other version", "np.yaml", "apiVersion: extensions/v1beta1\nkind: NetworkPolicy\nmetadata:\n  name: a\n", `unknown kind "NetworkPolicy" (apiVersion "extensions/v1beta1")`},
		{"second document", "two.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Secret\nmetadat:\n  name: b\n", `document 1: decoding v1/Secret: unknown field "metadat"`},
		{"wrong type", "secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: [a]\n", "cannot unmarshal array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeStrict(tc.file, []byte(tc.doc))
			if err == nil {
				t.Fatalf("decoded without error; want %s", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q; want it to contain %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// TestChecksCatch: each security check fails a pod that breaks it (the
// checks are not vacuous), wherever the pod spec comes from: pod.yaml's
// Pod, the Sandbox, the SandboxTemplate.
func TestChecksCatch(t *testing.T) {
	ptr := func(b bool) *bool { return &b }
	c := func(s *corev1.PodSpec, name string) *corev1.Container {
		if x := findContainer(s.Containers, name); x != nil {
			return x
		}
		return findContainer(s.InitContainers, name)
	}
	mount := func(s *corev1.PodSpec, container, volume string) *corev1.VolumeMount {
		return mountOf(c(s, container), volume)
	}
	for _, tc := range []struct {
		name   string
		mutate func(s *corev1.PodSpec)
		want   string
	}{
		{"token automounted", func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = nil }, "automountServiceAccountToken"},
		{"process namespace shared", func(s *corev1.PodSpec) { s.ShareProcessNamespace = ptr(true) }, "shareProcessNamespace"},
		{"sandbox as root", func(s *corev1.PodSpec) { c(s, sandboxName).SecurityContext.RunAsNonRoot = ptr(false) }, "container sandbox: runAsNonRoot"},
		{"sandbox uid 0", func(s *corev1.PodSpec) { *c(s, sandboxName).SecurityContext.RunAsUser = 0 }, "container sandbox: runAsUser"},
		{"sandbox writable root", func(s *corev1.PodSpec) { c(s, sandboxName).SecurityContext.ReadOnlyRootFilesystem = ptr(false) }, "container sandbox: readOnlyRootFilesystem"},
		{"sandbox escalates", func(s *corev1.PodSpec) { c(s, sandboxName).SecurityContext.AllowPrivilegeEscalation = nil }, "container sandbox: allowPrivilegeEscalation"},
		{"sandbox keeps caps", func(s *corev1.PodSpec) { c(s, sandboxName).SecurityContext.Capabilities.Drop = nil }, "container sandbox: capabilities must drop ALL"},
		{"sandbox adds a cap", func(s *corev1.PodSpec) {
			c(s, sandboxName).SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, "container sandbox: adds capabilities"},
		{"binary writable in the sandbox", func(s *corev1.PodSpec) { mount(s, sandboxName, binVolume).ReadOnly = false }, "gatebridge-bin must be mounted read-only"},
		{"sidecar adds SYS_ADMIN", func(s *corev1.PodSpec) {
			sc := c(s, sidecarName).SecurityContext
			sc.Capabilities.Add = append(sc.Capabilities.Add, "SYS_ADMIN")
		}, "capabilities added must be exactly"},
		{"sidecar lacks CHOWN", func(s *corev1.PodSpec) {
			c(s, sidecarName).SecurityContext.Capabilities.Add = []corev1.Capability{"FOWNER", "DAC_OVERRIDE"}
		}, "capabilities added must be exactly"},
		{"mailbox elsewhere in the sidecar", func(s *corev1.PodSpec) { mount(s, sidecarName, mailVolume).MountPath = "/mailbox" }, "the paths must be the same"},
		{"workspace elsewhere in the sidecar", func(s *corev1.PodSpec) { mount(s, sidecarName, workVolume).MountPath = "/work" }, "volume workspace: mounted at [/workspace] in sandbox but at [/work]"},
		{"mailbox on disk", func(s *corev1.PodSpec) { vol(s, mailVolume).EmptyDir.Medium = "" }, "medium Memory"},
		{"mailbox unbounded", func(s *corev1.PodSpec) { vol(s, mailVolume).EmptyDir.SizeLimit = nil }, "volume gatebridge: an emptyDir needs a sizeLimit"},
		{"token writable", func(s *corev1.PodSpec) { mount(s, sidecarName, "gatebridge-token").ReadOnly = false }, "--token-file /var/run/gatebridge/token: the mount must be read-only"},
		{"token readable by all", func(s *corev1.PodSpec) { *vol(s, "gatebridge-token").Secret.DefaultMode = 0o444 }, "gatebridge-token: defaultMode must be 0400"},
		{"token in the sandbox", func(s *corev1.PodSpec) {
			sb := c(s, sandboxName)
			sb.VolumeMounts = append(sb.VolumeMounts, corev1.VolumeMount{Name: "gatebridge-token", MountPath: "/run/t", ReadOnly: true})
		}, "container sandbox: mounts Secret volume gatebridge-token"},
		{"hostPath volume", func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, "volume h: only emptyDir"},
		{"sidecar without limits", func(s *corev1.PodSpec) { c(s, sidecarName).Resources.Limits = nil }, "container gatebridge: no memory limit"},
		{"init without limits", func(s *corev1.PodSpec) { c(s, installName).Resources.Limits = nil }, "container install-gatebridge: no cpu limit"},
		{"no seccomp", func(s *corev1.PodSpec) {
			c(s, sandboxName).SecurityContext.SeccompProfile = nil
			s.SecurityContext = nil
		}, "container sandbox: seccompProfile"},
		// The protected paths (.git): a read-only subPath mount in the
		// sandbox, declared to the sidecar.
		{".git writable in the sandbox", func(s *corev1.PodSpec) { gitMount(s).ReadOnly = false }, "declared read-only path /workspace/.git: the mount there must be readOnly"},
		{".git not mounted", func(s *corev1.PodSpec) {
			sb := c(s, sandboxName)
			sb.VolumeMounts = slices.DeleteFunc(sb.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/workspace/.git" })
		}, "declared read-only path /workspace/.git: no mount at /workspace/.git"},
		{".git from another subPath", func(s *corev1.PodSpec) { gitMount(s).SubPath = "git" }, "must be volume workspace subPath .git (what the sidecar sees there), not volume workspace subPath \"git\""},
		{".git from another volume", func(s *corev1.PodSpec) { gitMount(s).Name = "sandbox-tmp" }, "must be volume workspace subPath .git (what the sidecar sees there), not volume sandbox-tmp"},
		{".git not declared", func(s *corev1.PodSpec) { setEnv(c(s, sidecarName), "GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS", "") }, "protected path .git of the workspace /workspace (sandbox.protected_paths) is not covered by GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS"},
		{"a protected path added, not declared", func(s *corev1.PodSpec) {
			setEnv(c(s, sidecarName), "GATEBRIDGE_SANDBOX_PROTECTED_PATHS", ".git,.github")
		}, "protected path .github of the workspace /workspace (sandbox.protected_paths) is not covered"},
		{"a path declared, not mounted", func(s *corev1.PodSpec) {
			setEnv(c(s, sidecarName), "GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS", "/workspace/.git,/workspace/.github")
		}, "declared read-only path /workspace/.github: no mount at /workspace/.github"},
		{"writable mount inside .git", func(s *corev1.PodSpec) {
			sb := c(s, sandboxName)
			sb.VolumeMounts = append(sb.VolumeMounts, corev1.VolumeMount{Name: "sandbox-tmp", MountPath: "/workspace/.git/hooks"})
		}, "/workspace/.git/hooks is mounted writable inside the read-only /workspace/.git"},
		{"nested path under a directory the sandbox can rename", func(s *corev1.PodSpec) {
			setEnv(c(s, sidecarName), "GATEBRIDGE_SANDBOX_PROTECTED_PATHS", ".git,tools/hooks")
			setEnv(c(s, sidecarName), "GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS", "/workspace/.git,/workspace/tools/hooks")
			sb := c(s, sandboxName)
			sb.VolumeMounts = append(sb.VolumeMounts, corev1.VolumeMount{Name: workVolume, MountPath: "/workspace/tools/hooks", SubPath: "tools/hooks", ReadOnly: true})
		}, "declared read-only path /workspace/tools/hooks: /workspace/tools must be a mount point too"},
		{"a relative declaration", func(s *corev1.PodSpec) {
			setEnv(c(s, sidecarName), "GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS", ".git")
		}, `GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS: ".git" is not an absolute path`},
		{"declared for another workspace", func(s *corev1.PodSpec) {
			setEnv(c(s, sidecarName), "GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS", "/workspace/sub/.git")
		}, "protected path .git of the workspace /workspace (sandbox.protected_paths) is not covered"},
		{"read-only workspace declared, mounted writable", func(s *corev1.PodSpec) {
			sc := c(s, sidecarName)
			sc.Args = append(sc.Args, "--attach-readonly-workspace")
		}, "the sidecar says --attach-readonly-workspace, but the workspace is mounted writable"},
		{"serve on another port", func(s *corev1.PodSpec) {
			sc := c(s, sidecarName)
			for i, a := range sc.Args {
				if a == "0.0.0.0:7800" {
					sc.Args[i] = "0.0.0.0:7801"
				}
			}
		}, "--listen 0.0.0.0:7801: want port 7800"},
	} {
		for _, src := range podSources {
			t.Run(src.name+"/"+tc.name, func(t *testing.T) {
				m := load(t)
				spec := src.spec(m)
				if p := checkPodSpec(spec, m.secret.Name); len(p) > 0 {
					t.Fatalf("the unchanged pod has problems: %q", p)
				}
				tc.mutate(spec)
				p := checkPodSpec(spec, m.secret.Name)
				if !containsProblem(p, tc.want) {
					t.Fatalf("no problem containing %q; got %q", tc.want, p)
				}
			})
		}
	}
}

// TestNetworkPolicyChecksCatch: the policy checks fail a policy that
// leaks.
func TestNetworkPolicyChecksCatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(m *manifests)
		want   string
	}{
		{"egress not a policy type", func(m *manifests) { m.policy.Spec.PolicyTypes = m.policy.Spec.PolicyTypes[:1] }, "policyTypes must hold Ingress and Egress"},
		{"egress allowed", func(m *manifests) { m.policy.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}} }, "egress must be empty"},
		{"any source", func(m *manifests) { m.policy.Spec.Ingress[0].From = nil }, "it would admit every source"},
		{"any port", func(m *manifests) { m.policy.Spec.Ingress[0].Ports = nil }, "it would admit every port"},
		{"another pod", func(m *manifests) { m.pod.Labels = map[string]string{"app": "other"} }, "must select the pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t)
			tc.mutate(m)
			if p := checkNetworkPolicy(m.policy, m.pod.Labels); !containsProblem(p, tc.want) {
				t.Fatalf("no problem containing %q; got %q", tc.want, p)
			}
		})
	}
}

func TestTokenSecretChecksCatch(t *testing.T) {
	m := load(t)
	m.secret.StringData[tokenKey] = strings.Repeat("ab", 32)
	if p := checkTokenSecret(m.secret); !containsProblem(p, "placeholder") {
		t.Fatalf("a real-looking token passed: %q", p)
	}
}

// gitMount is the sandbox's mount at /workspace/.git.
func gitMount(s *corev1.PodSpec) *corev1.VolumeMount {
	return exactMount(findContainer(s.Containers, sandboxName), "/workspace/.git")
}

// setEnv sets (or, with value "", removes) c's environment variable name.
func setEnv(c *corev1.Container, name, value string) {
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if value != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
}

func vol(s *corev1.PodSpec, name string) *corev1.Volume {
	for i := range s.Volumes {
		if s.Volumes[i].Name == name {
			return &s.Volumes[i]
		}
	}
	return nil
}

func containsProblem(p problems, want string) bool {
	for _, s := range p {
		if strings.Contains(s, want) {
			return true
		}
	}
	return false
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not in the manifest", old)
	}
	return strings.Replace(s, old, new, 1)
}

// TestProtectedPathsMounted: each of gatebridge's default protected paths
// (configs/gatebridge.yaml) is a read-only subPath mount of the workspace
// in the sandbox of every pod spec here, and the sidecar declares it;
// checkPodSpec checks the details.
func TestProtectedPathsMounted(t *testing.T) {
	protected, err := defaultProtectedPaths()
	if err != nil {
		t.Fatal(err)
	}
	if len(protected) == 0 {
		t.Fatal("no default protected paths: the check would be vacuous")
	}
	m := load(t)
	for _, src := range podSources {
		what, spec := src.name, src.spec(m)
		sb := findContainer(spec.Containers, sandboxName)
		declared, _ := envList(findContainer(spec.Containers, sidecarName), envReadOnly)
		for _, p := range protected {
			m := exactMount(sb, "/workspace/"+p)
			if m == nil || m.Name != workVolume || m.SubPath != p || !m.ReadOnly {
				t.Errorf("%s: protected path %s: want a read-only subPath mount of %s at /workspace/%s, got %+v", what, p, workVolume, p, m)
			}
			if !slices.Contains(declared, "/workspace/"+p) {
				t.Errorf("%s: protected path %s not declared in %s: %q", what, p, envReadOnly, declared)
			}
		}
	}
}
