package k8s

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"sigs.k8s.io/yaml"
)

// crdDir holds agent-sandbox's CustomResourceDefinitions, copied from
// that project's repository (testdata/agent-sandbox/README.md says from
// which commit).
const crdDir = "testdata/agent-sandbox"

// preserveUnknown is the OpenAPI extension with which a CRD keeps the
// fields its schema does not name; without it, the API server prunes
// them (or, with strict field validation, refuses them).
const preserveUnknown = "x-kubernetes-preserve-unknown-fields"

// crdVersion is one version of a CRD's kind: its schema, closed (see
// closeObjects), ready to validate a manifest.
type crdVersion struct {
	file       string
	served     bool
	deprecated bool
	schema     *jsonschema.Resolved
}

// crd is the part of an apiextensions.k8s.io/v1 CustomResourceDefinition
// that the test reads.
type crd struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name       string `json:"name"`
			Served     bool   `json:"served"`
			Deprecated bool   `json:"deprecated"`
			Schema     struct {
				OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// crdSchemas are the schemas of every version of every CRD in crdDir, by
// "group/version/Kind" (a manifest's apiVersion + "/" + kind).
var crdSchemas = sync.OnceValues(func() (map[string]*crdVersion, error) {
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", crdDir)
	}
	out := map[string]*crdVersion{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c crd
		if err := yaml.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if c.APIVersion != "apiextensions.k8s.io/v1" || c.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: not an apiextensions.k8s.io/v1 CustomResourceDefinition", f)
		}
		for _, v := range c.Spec.Versions {
			key := c.Spec.Group + "/" + v.Name + "/" + c.Spec.Names.Kind
			if _, dup := out[key]; dup {
				return nil, fmt.Errorf("%s: %s defined twice", f, key)
			}
			rs, err := compileSchema(v.Schema.OpenAPIV3Schema, true)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", f, key, err)
			}
			out[key] = &crdVersion{file: f, served: v.Served, deprecated: v.Deprecated, schema: rs}
		}
	}
	return out, nil
})

// compileSchema turns a CRD version's openAPIV3Schema into a JSON Schema,
// resolved; closed, it refuses unknown fields (closeObjects).
func compileSchema(raw json.RawMessage, closed bool) (*jsonschema.Resolved, error) {
	if len(raw) == 0 {
		return nil, errors.New("no openAPIV3Schema")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	// The root's metadata is `type: object` with no properties: the API
	// server checks it as ObjectMeta, not by this schema. It stays open
	// here, and the typed decoding (metav1.ObjectMeta, strictly) checks
	// it instead.
	if closed {
		closeObjects(&s)
		if m := s.Properties["metadata"]; m != nil {
			m.AdditionalProperties = nil
		}
	}
	return s.Resolve(nil)
}

// closeObjects makes every object schema under s (s included) refuse the
// properties it does not name, unless it says
// x-kubernetes-preserve-unknown-fields or already says what other
// properties may be (additionalProperties: a map). A structural CRD
// schema relies on the API server's pruning to drop unknown fields, and
// its strict field validation (kubectl's default since 1.27) refuses
// them; a JSON Schema validator allows them unless told otherwise.
func closeObjects(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	isObject := s.Type == "object" || slices.Contains(s.Types, "object") || s.Properties != nil
	if isObject && s.AdditionalProperties == nil && s.Extra[preserveUnknown] != true {
		s.AdditionalProperties = falseSchema()
	}
	for _, p := range s.Properties {
		closeObjects(p)
	}
	closeObjects(s.AdditionalProperties)
	closeObjects(s.Items)
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.ItemsArray, s.PrefixItems} {
		for _, sub := range list {
			closeObjects(sub)
		}
	}
	closeObjects(s.Not)
}

// falseSchema is the schema no value satisfies (JSON Schema's `false`).
func falseSchema() *jsonschema.Schema { return &jsonschema.Schema{Not: &jsonschema.Schema{}} }

// isCRDKind reports whether apiVersion belongs to agent-sandbox, whose
// manifests must match a CRD in crdDir.
func isCRDKind(apiVersion string) bool {
	group, _, _ := strings.Cut(apiVersion, "/")
	return group == "agents.x-k8s.io" || strings.HasSuffix(group, ".agents.x-k8s.io")
}

// validateCRD validates the JSON of one manifest of an agent-sandbox kind
// against the schema of its CRD version: an unknown field, a wrong type,
// a value outside an enum or a minimum, a missing required field fail; so
// does a version the CRD does not serve, or one it deprecates.
func validateCRD(apiVersion, kind string, j []byte) error {
	schemas, err := crdSchemas()
	if err != nil {
		return fmt.Errorf("loading the CRDs: %w", err)
	}
	key := apiVersion + "/" + kind
	v, ok := schemas[key]
	if !ok {
		return fmt.Errorf("no CRD in %s defines %s", crdDir, key)
	}
	if !v.served || v.deprecated {
		return fmt.Errorf("%s: %s is deprecated or not served (%s)", key, apiVersion, v.file)
	}
	var doc any
	if err := json.Unmarshal(j, &doc); err != nil {
		return err
	}
	if err := v.schema.Validate(doc); err != nil {
		return fmt.Errorf("schema of %s (%s): %s", key, filepath.Base(v.file), schemaError(err))
	}
	return nil
}

// schemaError shortens a validation error of jsonschema-go, a chain of
// "validating SCHEMA-POINTER: " (one per level) ending in what failed, to
// the field where it failed and what failed: "spec.replicas: minimum: ...".
// (The validator names schemas, not the document's array indices: an
// item of a list is "[]".)
func schemaError(err error) string {
	msg, at := err.Error(), ""
	for {
		rest, ok := strings.CutPrefix(msg, "validating ")
		if !ok {
			break
		}
		ptr, tail, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		at, msg = ptr, tail
	}
	var field strings.Builder
	for _, part := range strings.Split(at, "/") {
		switch part {
		case "", "root", "properties":
		case "items":
			field.WriteString("[]")
		default:
			if field.Len() > 0 {
				field.WriteByte('.')
			}
			field.WriteString(part)
		}
	}
	if field.Len() == 0 {
		return "(the document): " + msg
	}
	return field.String() + ": " + msg
}
