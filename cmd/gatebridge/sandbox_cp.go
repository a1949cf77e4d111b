package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

func newSandboxCpCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file into or out of the workspace of the persistent sandbox NAME (NAME:PATH on one side)",
		Long: `Copy one regular file between this host and the workspace of a persistent
sandbox, as docker cp does: NAME:PATH names a path in the sandbox's
workspace (relative to it, or absolute as its commands see it), the other
side a local path or - (stdin, stdout). Copying into a directory (or a path
ending in /) keeps the file's name.

The sandbox's side follows the file API's rules (docs/jsonrpc.md, "Files"):
no link is followed, nothing outside the workspace or under a protected path
(sandbox.protected_paths) is reached, only regular files with one link are
read, a file is written atomically and at most gates.max_file_bytes. A
read-only workspace takes no copy in.

The host's side is written the same way: a link at DST is not followed
(refused), the file is made as a temporary file in DST's directory and
renamed over the name. As root, a DST directory that someone other than
root controls (owned by another user, reached through their directory or
link, or writable by group or others without the sticky bit) is refused:
copy to - and write it as that user instead.`,
		Example: `  gatebridge sandbox cp report.md work:docs/
  gatebridge sandbox cp work:out/result.json ./result.json
  gatebridge sandbox cp work:log.txt - | tail`,
		Args: cpArgs,
		RunE: a.withEngine(func(cmd *cobra.Command, args []string, d *docker.Backend) error {
			name, spath, in := cpSides(args)
			ds, err := d.Open(cmd.Context(), name)
			if err != nil {
				return err
			}
			defer ds.Close()
			if ds.Workspace() == "" {
				return withHint(fmt.Errorf("sandbox cp: sandbox %s has no workspace: the file API reaches the workspace only", name),
					"start the sandbox with --workspace DIR")
			}
			// As root: refuse a workspace path another user could
			// point elsewhere since the sandbox started (as start does).
			if err := config.CheckWorkspacePath(ds.Workspace()); err != nil {
				return err
			}
			f, err := control.NewFS(control.FSOptions{Workspace: ds.Workspace(), Inside: d.Config().WorkspacePath,
				Writable: ds.WorkspaceWritable(), Protected: a.cfg.Sandbox.ProtectedPaths, MaxFileBytes: a.cfg.Gates.MaxFileBytes})
			if err != nil {
				return err
			}
			var to string
			var n int64
			if in {
				to, n, err = f.CopyFileIn(args[0], spath, cmd.InOrStdin())
			} else {
				to, n, err = f.CopyFileOut(spath, args[1], cmd.OutOrStdout())
			}
			if err == nil && to != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: copied %d bytes to %s\n", n, to)
			}
			return err
		}),
	}
	return needsConfig(cmd)
}

// cpRemote splits NAME:PATH; a local path holding a colon starts with
// / or . (./a:b).
func cpRemote(s string) (name, path string, ok bool) {
	name, path, ok = strings.Cut(s, ":")
	if !ok || !docker.ValidName(name) || path == "" {
		return "", "", false
	}
	return name, path, true
}

func cpArgs(cmd *cobra.Command, args []string) error {
	usage := "usage: gatebridge sandbox cp SRC DST, with NAME:PATH on exactly one side"
	if len(args) != 2 {
		return withHint(fmt.Errorf("sandbox cp: want SRC and DST, got %d arguments", len(args)), usage)
	}
	_, _, r0 := cpRemote(args[0])
	_, _, r1 := cpRemote(args[1])
	if r0 == r1 {
		return withHint(errors.New("sandbox cp: exactly one of SRC and DST must be NAME:PATH"),
			usage+"; a local path holding a colon starts with ./")
	}
	return nil
}

// cpSides says which sandbox and path args name, and whether the copy goes
// into it.
func cpSides(args []string) (name, path string, in bool) {
	if name, path, ok := cpRemote(args[1]); ok {
		return name, path, true
	}
	name, path, _ = cpRemote(args[0])
	return name, path, false
}
