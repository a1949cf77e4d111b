package rpc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

func policyOf(t *testing.T, cfg cmdpolicy.Config) *cmdpolicy.Policy {
	t.Helper()
	p, err := cmdpolicy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// process/start checks the command policy before anything starts: a
// script that would remove a file after creating another is refused
// whole (-32007, data naming the command and the rule), and neither
// file is touched.
func TestProcessStartPolicyDenied(t *testing.T) {
	opts := testOptions(t)
	opts.Approvals.Commands = policyOf(t, cmdpolicy.Config{Rules: []cmdpolicy.Rule{
		{Command: "rm", Decision: "deny"},
		{Command: "git", Args: []string{"push"}, Decision: "ask"},
	}})
	c := newClient(t, opts)
	ws, _ := c.openSandbox("sb", local.Name, true)
	victim := filepath.Join(ws, "victim")
	if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "p1", SandboxID: "sb",
		Argv: []string{"sh", "-c", "touch made; rm -f victim"}})
	if e == nil || e.Code != CodePolicyDenied {
		t.Fatalf("process/start of a denied script: %+v, want code %d", e, CodePolicyDenied)
	}
	b, _ := json.Marshal(e.Data)
	var d struct {
		Kind      string   `json:"kind"`
		Decision  string   `json:"decision"`
		Source    string   `json:"source"`
		RuleIndex int      `json:"rule_index"`
		Command   []string `json:"command"`
		Shell     bool     `json:"shell"`
		Hint      string   `json:"hint"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Kind != "policy_denied" || d.Decision != "deny" || d.Source != "rule" || d.RuleIndex != 0 ||
		strings.Join(d.Command, " ") != "rm -f victim" || !d.Shell || d.Hint == "" {
		t.Errorf("data = %s", b)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the victim is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "made")); err == nil {
		t.Errorf("part of the refused script ran")
	}
	// Allowed commands still run.
	if out := c.Run("sb", "p3", nil, "sh", "-c", "echo ok"); strings.TrimSpace(string(out.Stdout)) != "ok" {
		t.Errorf("an allowed command: %+v", out)
	}
}

// A command the policy marks ask was refused by process/start like a
// deny: the check ran before the reply, where waiting for the same
// connection's answer could not work. Now process/start answers at once,
// the client gets approval/request with the command and the rule (the
// connection keeps serving meanwhile: process/list answers, the process
// listed as running), and the command starts only once allowed: allowed,
// it runs; denied, it exits 126 without starting (its marker file is not
// made), its stderr naming the rule and the reason.
func TestProcessStartPolicyAsk(t *testing.T) {
	opts := testOptions(t)
	opts.Approvals.Commands = policyOf(t, cmdpolicy.Config{Rules: []cmdpolicy.Rule{{Command: "touch", Decision: "ask"}}})
	c := newClient(t, opts)
	ws, _ := c.openSandbox("sb", local.Name, true)
	for _, allow := range []bool{true, false} {
		id, marker := fmt.Sprint("allow-", allow), fmt.Sprint("made-", allow)
		script := "touch " + marker + " && echo ran"
		c.Call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "sb", Argv: []string{"sh", "-c", script}}, nil)
		m, raw := c.nextRequest(MethodApprovalRequest)
		var ap ApprovalRequestParams
		if err := json.Unmarshal(raw, &ap); err != nil {
			t.Fatal(err)
		}
		if strings.Join(ap.Command, " ") != "sh -c "+script || !strings.Contains(ap.Rule, "rule 0 {command: touch, decision: ask}") ||
			ap.Gate != "" || ap.ProcessID != id || ap.SandboxID != "sb" {
			t.Fatalf("approval/request: %s", raw)
		}
		var list ProcessListResult // the question waits; the connection serves
		c.Call(MethodProcessList, struct{}{}, &list)
		running := false
		for _, pi := range list.Processes {
			running = running || pi.ProcessID == id && pi.Running
		}
		if !running {
			t.Fatalf("process/list while asking: %+v", list)
		}
		if _, err := os.Stat(filepath.Join(ws, marker)); err == nil {
			t.Fatalf("%s: the command started before the answer", id)
		}
		ans := ApprovalResult{Decision: DecisionAllow}
		if !allow {
			ans = ApprovalResult{Decision: DecisionDeny, Reason: "not today"}
		}
		c.Respond(m, ans, nil)
		o := c.Collect(id, 30*time.Second, nil)
		_, statErr := os.Stat(filepath.Join(ws, marker))
		if allow && (o.Exited.ExitCode != 0 || string(o.Stdout) != "ran\n" || statErr != nil) {
			t.Fatalf("allowed: %+v %q %q (%v)", o.Exited, o.Stdout, o.Stderr, statErr)
		}
		if !allow && (o.Exited.ExitCode != 126 || len(o.Stdout) != 0 || !errors.Is(statErr, os.ErrNotExist) ||
			!strings.Contains(string(o.Stderr), "rule 0 {command: touch, decision: ask}") || !strings.Contains(string(o.Stderr), "not today") ||
			!strings.Contains(string(o.Stderr), "gatebridge: hint: ")) {
			t.Fatalf("denied: %+v %q %q (%v)", o.Exited, o.Stdout, o.Stderr, statErr)
		}
	}
}

// A process/signal while the question waits withdraws it: the process
// exits 126 without starting (its marker is not made), stderr saying
// why, even when the client answers allow afterwards.
func TestProcessStartPolicyAskSignal(t *testing.T) {
	opts := testOptions(t)
	opts.Approvals.Commands = policyOf(t, cmdpolicy.Config{Rules: []cmdpolicy.Rule{{Command: "touch", Decision: "ask"}}})
	c := newClient(t, opts)
	ws, _ := c.openSandbox("sb", local.Name, true)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"touch", "made"}}, nil)
	m, _ := c.nextRequest(MethodApprovalRequest)
	c.Call(MethodProcessSignal, ProcessSignalParams{ProcessID: "p", Signal: "TERM"}, nil)
	o := c.Collect("p", 30*time.Second, nil)
	c.Respond(m, ApprovalResult{Decision: DecisionAllow}, nil) // too late
	if _, err := os.Stat(filepath.Join(ws, "made")); !errors.Is(err, os.ErrNotExist) || o.Exited.ExitCode != 126 ||
		!strings.Contains(string(o.Stderr), "withdrawn: a signal (terminated) came before the command started") {
		t.Fatalf("signal while asking: %+v %q (%v)", o.Exited, o.Stderr, err)
	}
}

// sandbox.max_command_bytes and sandbox.max_commands: a command over the
// size is refused before it starts, the sandbox's commands past the count
// too; both name their key, and initialize says both.
func TestProcessStartCommandLimits(t *testing.T) {
	opts := testOptions(t)
	opts.MaxCommandBytes, opts.MaxCommands = 100, 2
	c := newUninitialized(t, opts)
	var init InitializeResult
	c.Call(MethodInitialize, InitializeParams{ClientName: "t", ProtocolVersion: ProtocolVersion}, &init)
	c.Notify(MethodInitialized, struct{}{})
	if l := init.Limits; l.MaxCommandBytes != 100 || l.MaxCommands != 2 {
		t.Errorf("initialize's limits: maxCommandBytes %d, maxCommands %d; want 100, 2", l.MaxCommandBytes, l.MaxCommands)
	}
	ws, _ := c.openSandbox("sb", local.Name, true)
	long := "touch made; : " + strings.Repeat("x", 100)
	e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "p0", SandboxID: "sb", Argv: []string{"sh", "-c", long}})
	if e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, "sandbox.max_command_bytes (100)") {
		t.Fatalf("a command over max_command_bytes: %+v", e)
	}
	if _, err := os.Stat(filepath.Join(ws, "made")); err == nil {
		t.Errorf("the command over the size ran")
	}
	for _, id := range []string{"p1", "p2"} { // the refused one did not count
		if out := c.Run("sb", id, nil, "true"); out.Exited.ExitCode != 0 {
			t.Fatalf("%s: %+v", id, out)
		}
	}
	e = c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "p3", SandboxID: "sb", Argv: []string{"touch", "third"}})
	if e == nil || e.Code != CodeLimit || !strings.Contains(e.Message, "sandbox.max_commands") {
		t.Fatalf("a third command with max_commands 2: %+v", e)
	}
	if _, err := os.Stat(filepath.Join(ws, "third")); err == nil {
		t.Errorf("the command over the count ran")
	}
	// Another sandbox has its own count.
	c.openSandbox("sb2", local.Name, false)
	if out := c.Run("sb2", "q1", nil, "true"); out.Exited.ExitCode != 0 {
		t.Fatalf("another sandbox: %+v", out)
	}
}

// The environment process/start and sandbox/open add is part of the
// command: PATH pointing at a directory the sandbox wrote (its ls runs
// rm) is the `env PATH=… ls` the policy calls unknown, and refused with
// unknown: deny; the victim is untouched.
func TestProcessStartPolicyEnv(t *testing.T) {
	opts := testOptions(t)
	opts.Approvals.Commands = policyOf(t, cmdpolicy.Config{Unknown: "deny", Rules: []cmdpolicy.Rule{{Command: "rm", Decision: "deny"}}})
	c := newClient(t, opts)
	ws, _ := c.openSandbox("sb", local.Name, true)
	victim := filepath.Join(ws, "victim")
	if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "bin", "ls"), []byte("#!/bin/sh\nexec /bin/rm -f "+victim+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, env := range []map[string]string{{"PATH": filepath.Join(ws, "bin")}, {"BASH_ENV": filepath.Join(ws, "bin", "ls")},
		{"LD_PRELOAD": filepath.Join(ws, "evil.so")}, {"BASH_FUNC_ls%%": "() { rm -f victim; }"}} {
		id := fmt.Sprintf("p%d", i)
		e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "sb", Argv: []string{"ls"}, Env: env})
		if e == nil || e.Code != CodePolicyDenied || !strings.Contains(e.Message, "sets") {
			t.Errorf("process/start of ls with env %v: %+v, want code %d saying what it sets", env, e, CodePolicyDenied)
			c.Call(MethodProcessWait, ProcessWaitParams{ProcessID: id}, nil)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the victim is gone: %v", err)
	}
	// The sandbox's own env (sandbox/open) counts too.
	ws2 := traversableTempDir(t)
	c.Call(MethodSandboxOpen, SandboxOpenParams{SandboxID: "sb2", Backend: local.Name, Workspace: ws2, WritableWorkspace: true,
		Env: map[string]string{"PATH": filepath.Join(ws, "bin")}}, nil)
	e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "q", SandboxID: "sb2", Argv: []string{"ls"}})
	if e == nil || e.Code != CodePolicyDenied {
		t.Errorf("process/start in a sandbox opened with PATH: %+v, want code %d", e, CodePolicyDenied)
		c.Call(MethodProcessWait, ProcessWaitParams{ProcessID: "q"}, nil)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the victim is gone: %v", err)
	}
	// An ordinary variable changes nothing.
	if out := c.Run("sb", "ok", nil, "sh", "-c", "echo ok"); strings.TrimSpace(string(out.Stdout)) != "ok" {
		t.Errorf("an allowed command: %+v", out)
	}
}
