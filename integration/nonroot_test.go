package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

const nobody = 65534

// TestNonRoot runs gatebridge as nobody with the local and bwrap backends,
// with a workspace and session dir only nobody can use.
func TestNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to nobody")
	}
	for _, backend := range []string{"local", "bwrap"} {
		t.Run(backend, func(t *testing.T) {
			needBackend(t, backend)
			base := workspace(t)
			ws, sessions := filepath.Join(base, "ws"), filepath.Join(base, "sessions")
			writeFiles(t, ws, map[string]string{"f.txt": "owned by nobody\n"})
			for _, p := range []string{ws, filepath.Join(ws, "f.txt"), sessions} {
				os.Mkdir(p, 0o700)
				if err := os.Chown(p, nobody, nobody); err != nil {
					t.Fatal(err)
				}
			}
			os.Chmod(ws, 0o700)
			cfg := filepath.Join(base, "gatebridge.yaml")
			if err := os.WriteFile(cfg, []byte("bridge:\n  session_dir: "+sessions+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "--config", cfg, "run", "--json", "--sandbox", backend, "--",
				"sh", "-c", `gb_echo hi; id -u; read_file f.txt; : > "$TMPDIR/x"; submit done`)
			cmd.Dir = ws
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			var res JSONResult
			if err := json.Unmarshal(so.Bytes(), &res); err != nil {
				t.Fatalf("%v (exit %v): stdout %q, stderr %q", err, cmd.ProcessState.ExitCode(), so.String(), se.String())
			}
			// bwrap as nobody maps the user into its namespace unchanged.
			if want := "hi\n65534\nowned by nobody\n"; res.ExitCode != 0 || res.Stdout != want || res.Stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q; gatebridge stderr %q", res.ExitCode, res.Stdout, res.Stderr, want, se.String())
			}
			if res.Answer == nil || *res.Answer != "done" || len(res.Calls) != 3 {
				t.Errorf("answer %v, %d calls", res.Answer, len(res.Calls))
			}
			assertEmptyDir(t, sessions)
		})
	}
}
