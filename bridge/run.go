package bridge

import (
	"context"
	"fmt"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Result is the outcome of one command run with a session.
type Result struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	// StdoutBase64 is set when Stdout is not valid UTF-8: its exact bytes,
	// which JSON cannot carry in Stdout (docs/json.md). The same for
	// StderrBase64 and AnswerBase64.
	StdoutBase64 []byte            `json:"stdout_base64,omitempty"`
	Stderr       string            `json:"stderr"`
	StderrBase64 []byte            `json:"stderr_base64,omitempty"`
	TimedOut     bool              `json:"timed_out"`
	Canceled     bool              `json:"canceled,omitempty"`
	Truncated    bool              `json:"truncated"`
	DurationMS   int64             `json:"duration_ms"`
	Answer       *string           `json:"answer"` // submit's (the last call), else with Config.SubmitLines the last stdout line "SUBMIT: ANSWER"
	AnswerBase64 []byte            `json:"answer_base64,omitempty"`
	Sandbox      string            `json:"sandbox"`
	SandboxInfo  map[string]string `json:"sandbox_info,omitempty"`
	SessionDir   string            `json:"session_dir,omitempty"` // set when kept
	Calls        []CallRecord      `json:"calls"`
	// CallsOmitted counts this run's calls past bridge.limits.max_records:
	// Calls holds only the first ones.
	CallsOmitted int `json:"calls_omitted,omitempty"`
	// CallsIgnored counts call entries refused without being tracked in a
	// flood far past bridge.limits.max_calls (each ready one got the
	// call-limit refusal; the first is in Calls).
	CallsIgnored int `json:"calls_ignored,omitempty"`
}

// Run opens a session with cfg, runs spec in backend, and closes the
// session (removing its directory unless cfg.Keep).
func Run(ctx context.Context, cfg Config, backend sandbox.Backend, spec sandbox.Spec) (*Result, error) {
	s, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	res, err := s.Run(ctx, backend, spec)
	if cerr := s.Close(); cerr != nil && err == nil && !cfg.Keep {
		err = fmt.Errorf("close session: %w", cerr)
	}
	return res, err
}
