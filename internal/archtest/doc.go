// Package archtest holds no code: its test checks gatebridge's import
// rules and the size of cmd/gatebridge (docs/architecture.md, "Import
// rules"). It runs with every `go test ./...`.
//
// The rules, on non-test imports (every GOOS gatebridge builds for:
// linux and darwin), paths relative to the module:
//
//   - only cmd/gatebridge imports a concrete sandbox backend
//     (sandbox/{local,bwrap,docker,agent}) or the mcp gate kind
//     (gates/mcptools); backends may import each other (docker runs the
//     agent) and their own subpackages;
//   - the control plane (bridge/control) imports no sandbox/* subpackage,
//     no front end (bridge/rpc, bridge/mcpserver);
//   - the front ends (bridge/rpc, bridge/mcpserver) import no sandbox/*
//     subpackage and not bridge/mailbox;
//   - bridge/mailbox, the wire format, imports nothing from the module
//     and not golang.org/x/sys;
//   - sandbox and its backends import neither bridge/... nor gates/...
//     (sandbox/sandboxtest, the conformance suite, may);
//   - gates/... does not import sandbox/...;
//   - wrappers imports from the module only bridge/mailbox and internal/...;
//   - bridge, the mailbox server, imports no front end and not the
//     control plane;
//   - the leaf internals (internal/{hint,fspath,lossless,hostilefs})
//     import from the module only each other;
//   - cmd/gatebridge has fewer than 2,500 non-test lines: a permanent
//     cap, which no allow file raises (a new command's logic goes into
//     a package).
//
// A violation that an open step of issue 27 still has to remove is
// listed in allow/stepN.txt, one file per step so that parallel steps
// never edit the same file; the step deletes its lines (and its file)
// when it removes the violation. The test fails on a violation no allow
// file lists, and on an allow line that no longer matches one.
package archtest
