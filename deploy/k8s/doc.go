// Package k8s holds no code: it is the module of the Kubernetes manifests
// in this directory, and its test checks agent-sandbox's manifests against
// that project's CRD schemas (testdata/agent-sandbox), decodes every
// manifest strictly into the Kubernetes API types, and checks their
// security properties (see README.md). It is a module of its own so that
// the Kubernetes modules stay out of gatebridge's go.mod.
package k8s
