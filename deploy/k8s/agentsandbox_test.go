package k8s

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// TestSchemaRefuses: agent-sandbox's manifests changed to hold an unknown
// field, a wrong type, a value the CRD does not allow, or to lack a
// required field, fail its CRD's schema. For the cases marked so, the
// typed mirror alone would have taken the change: the schema is what
// catches it.
func TestSchemaRefuses(t *testing.T) {
	template := readFile(t, "sandboxtemplate.yaml")
	pool := readFile(t, "sandboxwarmpool.yaml")
	claim := readFile(t, "sandboxclaim.yaml")
	for _, tc := range []struct {
		name          string
		doc           string
		mirrorAccepts bool // the mirror type decodes it without error
		want          string
	}{
		// Unknown fields.
		{"misspelt template field", replaceOnce(t, template, "  networkPolicyManagement: Managed\n", "  networkPolicyManagment: Managed\n"), false,
			`spec: unexpected additional properties ["networkPolicyManagment"]`},
		{"a pod selector in the template's policy (the controller's to set)", replaceOnce(t, template, "  networkPolicy:\n", "  networkPolicy:\n    podSelector: {}\n"), false,
			`spec.networkPolicy: unexpected additional properties ["podSelector"]`},
		{"misspelt field in a policy rule", replaceOnce(t, template, "      - from:\n", "      - form:\n"), false,
			`spec.networkPolicy.ingress[]: unexpected additional properties ["form"]`},
		{"pod metadata agent-sandbox has not", replaceOnce(t, template, "    metadata:\n      labels:\n", "    metadata:\n      namespace: x\n      labels:\n"), false,
			`spec.podTemplate.metadata: unexpected additional properties ["namespace"]`},
		{"unknown field in a container", replaceOnce(t, template, "          workingDir: /workspace\n", "          workDir: /workspace\n"), false,
			`spec.podTemplate.spec.containers[]: unexpected additional properties ["workDir"]`},
		{"pool status written by hand is not spec", replaceOnce(t, pool, "  replicas: 4\n", "  replicas: 4\n  readyReplicas: 4\n"), false,
			`spec: unexpected additional properties ["readyReplicas"]`},
		// Wrong types.
		{"service a string", replaceOnce(t, template, "  service: false\n", "  service: \"false\"\n"), false,
			`spec.service: type: false has type "string", want "boolean"`},
		{"a port a list", replaceOnce(t, template, "containerPort: 7800", "containerPort: [7800]"), false,
			`spec.podTemplate.spec.containers[].ports[].containerPort: type: [7800] has type "array", want "integer"`},
		// Values outside the CRD's enums and bounds, missing fields.
		{"env injection policy not in the enum", replaceOnce(t, template, "envVarsInjectionPolicy: Disallowed", "envVarsInjectionPolicy: Sometimes"), true,
			`spec.envVarsInjectionPolicy: enum: Sometimes does not equal any of: [Allowed Overrides Disallowed]`},
		{"negative replicas", replaceOnce(t, pool, "replicas: 4", "replicas: -1"), true,
			`spec.replicas: minimum: -1/1 is less than 0`},
		{"update strategy not in the enum", replaceOnce(t, pool, "type: Recreate", "type: Rolling"), true,
			`spec.updateStrategy.type: enum: Rolling does not equal any of: [Recreate OnReplenish]`},
		{"pool without a template", replaceOnce(t, pool, "  sandboxTemplateRef:\n    name: gatebridge-sandbox\n", ""), true,
			`spec: required: missing properties: ["sandboxTemplateRef"]`},
		{"claim env without a value", replaceOnce(t, claim, "    name: gatebridge-sandbox\n", "    name: gatebridge-sandbox\n  env:\n    - name: X\n"), true,
			`spec.env[]: required: missing properties: ["value"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := yaml.YAMLToJSONStrict([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			var tm struct{ APIVersion, Kind string }
			if err := json.Unmarshal(j, &tm); err != nil {
				t.Fatal(err)
			}
			err = validateCRD(tm.APIVersion, tm.Kind, j)
			if err == nil {
				t.Fatalf("the schema took it; want %s", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q; want it to contain %q", err, tc.want)
			}
			if tc.mirrorAccepts {
				obj := kinds[tm.APIVersion+"/"+tm.Kind]()
				strict, err := kjson.UnmarshalStrict(j, obj)
				if err != nil || len(strict) > 0 {
					t.Fatalf("the mirror refuses it too (%v %v): the case does not show what the schema adds", err, strict)
				}
			}
			t.Log(err)
		})
	}
}

// TestSchemaVersions: only the versions a CRD serves and does not
// deprecate are taken, and only kinds it defines.
func TestSchemaVersions(t *testing.T) {
	for _, tc := range []struct{ apiVersion, kind, want string }{
		{"extensions.agents.x-k8s.io/v1alpha1", "SandboxTemplate", "is deprecated or not served"},
		{"agents.x-k8s.io/v1alpha1", "Sandbox", "is deprecated or not served"},
		{"extensions.agents.x-k8s.io/v1", "SandboxTemplate", "no CRD in testdata/agent-sandbox defines extensions.agents.x-k8s.io/v1/SandboxTemplate"},
		{"extensions.agents.x-k8s.io/v1beta1", "SandboxPool", "no CRD in testdata/agent-sandbox defines"},
	} {
		err := validateCRD(tc.apiVersion, tc.kind, []byte(`{}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: error %v; want it to contain %q", tc.apiVersion, tc.kind, err, tc.want)
		}
	}
}

// TestSchemaIsClosed: the CRD's schema as it is takes an unknown field
// (the API server prunes or, strictly, refuses it; a JSON Schema
// validator does neither); closed, it refuses it. A schema with
// x-kubernetes-preserve-unknown-fields, or with additionalProperties (a
// map), stays open.
func TestSchemaIsClosed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(crdDir, "extensions.agents.x-k8s.io_sandboxtemplates.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c crd
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	for _, v := range c.Spec.Versions {
		if v.Name == "v1beta1" {
			raw = v.Schema.OpenAPIV3Schema
		}
	}
	j, err := yaml.YAMLToJSONStrict([]byte(replaceOnce(t, readFile(t, "sandboxtemplate.yaml"), "runAsNonRoot: true", "runAsNonRot: true")))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(j, &doc); err != nil {
		t.Fatal(err)
	}
	open, err := compileSchema(raw, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Validate(doc); err != nil {
		t.Fatalf("the open schema refused the unknown field (%v): this test no longer shows why it is closed", err)
	}
	closed, err := compileSchema(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Validate(doc); err == nil || !strings.Contains(err.Error(), `unexpected additional properties ["runAsNonRot"]`) {
		t.Fatalf("the closed schema: %v; want the unknown field refused", err)
	}

	// A schema of each shape.
	schema := json.RawMessage(`{"type": "object", "properties": {
		"apiVersion": {"type": "string"},
		"metadata": {"type": "object"},
		"typed": {"type": "object", "properties": {"a": {"type": "string"}}},
		"map": {"type": "object", "additionalProperties": {"type": "string"}},
		"kept": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}},
		"empty": {"type": "object"}}}`)
	rs, err := compileSchema(schema, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc  string
		want string // "" if valid
	}{
		{`{"typed": {"a": "x"}, "map": {"any": "x"}, "kept": {"any": 1, "a": "x"}, "metadata": {"name": "x"}}`, ""},
		{`{"other": 1}`, `unexpected additional properties ["other"]`},
		{`{"typed": {"b": "x"}}`, `unexpected additional properties ["b"]`},
		{`{"map": {"any": 1}}`, `want "string"`},
		{`{"kept": {"a": 1}}`, `want "string"`},
		{`{"empty": {"x": 1}}`, `unexpected additional properties ["x"]`},
	} {
		var d any
		if err := json.Unmarshal([]byte(tc.doc), &d); err != nil {
			t.Fatal(err)
		}
		err := rs.Validate(d)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want valid", tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error containing %q", tc.doc, err, tc.want)
		}
	}
}

// TestTemplateChecksCatch: each check of the SandboxTemplate, the pool and
// the claim fails a manifest changed to break it.
func TestTemplateChecksCatch(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name   string
		mutate func(m *manifests)
		want   string
	}{
		{"no runtime class (the node's kernel)", func(m *manifests) { m.template.Spec.PodTemplate.Spec.RuntimeClassName = nil }, "runtimeClassName must be gvisor"},
		{"runc", func(m *manifests) { m.template.Spec.PodTemplate.Spec.RuntimeClassName = str("runc") }, "runtimeClassName must be gvisor"},
		{"mailbox without the mount hint", func(m *manifests) {
			delete(m.template.Spec.PodTemplate.Metadata.Annotations, gvisorMountHint+mailVolume+".type")
		}, "the mailbox must be one volume inside gVisor"},
		{"mailbox shared per container", func(m *manifests) {
			m.template.Spec.PodTemplate.Metadata.Annotations[gvisorMountHint+mailVolume+".share"] = "container"
		}, "the mailbox must be one volume inside gVisor"},
		{"a hint on the workspace, whose .git is a subPath mount", func(m *manifests) {
			m.template.Spec.PodTemplate.Metadata.Annotations[gvisorMountHint+workVolume+".type"] = "tmpfs"
		}, "volume workspace has a subPath mount (container sandbox, /workspace/.git), which the hint does not cover"},
		{"the controller's default policy (Internet egress)", func(m *manifests) { m.template.Spec.NetworkPolicy = nil }, "networkPolicy must be set"},
		{"unmanaged policy", func(m *manifests) { m.template.Spec.NetworkPolicyManagement = "Unmanaged" }, `networkPolicyManagement "Unmanaged"`},
		{"an egress rule", func(m *manifests) {
			m.template.Spec.NetworkPolicy.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
		}, "networkPolicy: egress must be empty"},
		{"ingress from anywhere", func(m *manifests) { m.template.Spec.NetworkPolicy.Ingress[0].From = nil }, "networkPolicy: ingress 0: no from"},
		{"ingress on every port", func(m *manifests) { m.template.Spec.NetworkPolicy.Ingress[0].Ports = nil }, "networkPolicy: ingress 0: no ports"},
		{"claims may set env", func(m *manifests) { m.template.Spec.EnvVarsInjectionPolicy = "Overrides" }, `envVarsInjectionPolicy "Overrides"`},
		{"claims may add volumes", func(m *manifests) { m.template.Spec.VolumeClaimTemplatesPolicy = "Allowed" }, `volumeClaimTemplatesPolicy "Allowed"`},
		{"pool of another template", func(m *manifests) { m.pool.Spec.SandboxTemplateRef.Name = "other" }, `sandboxTemplateRef "other"`},
		{"pool keeps stale pods", func(m *manifests) { m.pool.Spec.UpdateStrategy.Type = "OnReplenish" }, "updateStrategy.type must be Recreate"},
		{"pool strategy defaulted", func(m *manifests) { m.pool.Spec.UpdateStrategy = nil }, "updateStrategy.type must be Recreate"},
		{"empty pool", func(m *manifests) { *m.pool.Spec.Replicas = 0 }, "replicas must be set and at least 1"},
		{"claim from another pool", func(m *manifests) { m.claim.Spec.WarmPoolRef.Name = "other" }, `warmPoolRef "other"`},
		{"claim sets env", func(m *manifests) {
			m.claim.Spec.Env = append(m.claim.Spec.Env, struct {
				Name          string `json:"name"`
				Value         string `json:"value"`
				ContainerName string `json:"containerName,omitempty"`
			}{Name: "GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS", Value: "/", ContainerName: sidecarName})
		}, "no env and no volumeClaimTemplates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t)
			tc.mutate(m)
			if p := checkAll(m); !containsProblem(p, tc.want) {
				t.Fatalf("no problem containing %q; got %q", tc.want, p)
			}
		})
	}
}

// TestManifestMutations: a manifest file changed on disk (its text, as a
// person would edit it) fails the test, whether the change breaks the
// schema or a security property.
func TestManifestMutations(t *testing.T) {
	if p := checkAll(load(t)); len(p) > 0 {
		t.Fatalf("the manifests as committed have problems: %q", p)
	}
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"unknown field", "sandboxtemplate.yaml", "  volumeClaimTemplatesPolicy: Disallowed\n", "  volumeClaimTemplatePolicy: Disallowed\n",
			`spec: unexpected additional properties ["volumeClaimTemplatePolicy"]`},
		{"wrong type", "sandboxtemplate.yaml", "            port: 7800\n", "            port: [7800]\n", `spec.networkPolicy.ingress[].ports[].port`},
		{"negative pool", "sandboxwarmpool.yaml", "replicas: 4", "replicas: -4", "spec.replicas: minimum"},
		{"not gVisor", "sandboxtemplate.yaml", "      runtimeClassName: gvisor\n", "      runtimeClassName: runc\n", "runtimeClassName must be gvisor"},
		{".git writable in the sandbox", "sandboxtemplate.yaml", "              subPath: .git\n              readOnly: true\n", "              subPath: .git\n",
			"declared read-only path /workspace/.git: the mount there must be readOnly"},
		{"privilege escalation", "sandboxtemplate.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "container install-gatebridge: allowPrivilegeEscalation must be false"},
		{"the token in the sandbox's reach", "sandboxtemplate.yaml", "            - name: sandbox-tmp\n              mountPath: /tmp\n",
			"            - name: sandbox-tmp\n              mountPath: /tmp\n            - name: gatebridge-token\n              mountPath: /run/token\n",
			"container sandbox: mounts Secret volume gatebridge-token"},
		{"policy unmanaged", "sandboxtemplate.yaml", "networkPolicyManagement: Managed", "networkPolicyManagement: Unmanaged", `networkPolicyManagement "Unmanaged"`},
		{"stale pods kept", "sandboxwarmpool.yaml", "type: Recreate", "type: OnReplenish", "updateStrategy.type must be Recreate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := manifestFiles(".")
			if err != nil {
				t.Fatal(err)
			}
			var path string
			for _, f := range files {
				if filepath.Base(f) == tc.file {
					path = f
				}
			}
			if path == "" {
				t.Fatalf("no %s in %q", tc.file, files)
			}
			m, err := loadManifestsWith(".", map[string]string{path: replaceOnce(t, readFile(t, path), tc.old, tc.new)})
			var got string
			if err != nil {
				got = err.Error()
			} else {
				got = strings.Join(checkAll(m), "\n")
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("want a failure containing %q; got %q", tc.want, got)
			}
		})
	}
}

// checkAll is every check of every manifest.
func checkAll(m *manifests) problems {
	var p problems
	for _, src := range podSources {
		for _, s := range checkPodSpec(src.spec(m), m.secret.Name) {
			p.add("%s: %s", src.name, s)
		}
	}
	for _, labels := range []map[string]string{m.pod.Labels, m.sandbox.Spec.PodTemplate.Metadata.Labels, m.template.Spec.PodTemplate.Metadata.Labels} {
		p = append(p, checkNetworkPolicy(m.policy, labels)...)
	}
	p = append(p, checkTokenSecret(m.secret)...)
	p = append(p, checkSandboxTemplate(m.template)...)
	p = append(p, checkWarmPool(m.pool, m.template)...)
	p = append(p, checkClaim(m.claim, m.pool)...)
	return p
}
