// Package configs holds gatebridge's annotated configuration file,
// gatebridge.yaml in this directory: every key with its default and what
// it does. `gatebridge config example` prints it (so a binary installed
// with `go install` has it too), and cmd/gatebridge's tests keep it in
// step with the defaults: the file is the one source of truth.
package configs

import _ "embed"

// Example is gatebridge.yaml, byte for byte.
//
//go:embed gatebridge.yaml
var Example string
