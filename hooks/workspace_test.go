package hooks

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"avfs/wire"
)

// A payload whose directory is in a workspace is decided for the
// workspace's vault, through its avfs, and rewritten to run through that
// avfs (its socket as --server) in the same directory of the vault, for
// every harness; Project and --server give way to it. A workspace that is
// down blocks the call, saying how to bring it up.
func TestWorkspaceCommands(t *testing.T) {
	const sock = "/home/u/.avfs/run/workspaces/0123456789abcdef.sock"
	ws := &Workspace{Dir: "/home/u/proj", Vault: "proj-01234567", Server: sock}
	o := testOptions
	o.Project, o.Server = "/elsewhere", "/run/avfs.sock"
	o.Workspace = func(dir string) (*Workspace, error) {
		if dir == ws.Dir || strings.HasPrefix(dir, ws.Dir+"/") {
			return ws, nil
		}
		return nil, nil
	}
	verdict := Verdict{Decision: wire.AllowWithCheckpoint, Reasons: []wire.Reason{reasonCP}, Vault: ws.Vault}
	for _, c := range []struct {
		h       Harness
		payload string
		cwd     string
	}{
		{ClaudeCode, "pre_bash.json", "/src"},
		{Codex, "pre_bash.json", "/"},
		{Gemini, "before_shell.json", "/web"},
	} {
		d := &fakeDecider{verdict: verdict}
		a := Run(context.Background(), c.h, d, o, bytes.NewReader(readPayload(t, c.h, c.payload)))
		want := "--vault " + ws.Vault + " --json proxy exec --server " + sock + " --cwd " + c.cwd + " "
		if a.Exit != 0 || !strings.Contains(string(a.Stdout), want) {
			t.Errorf("%s: exit %d %s %s; want a rewrite with %q", c.h, a.Exit, a.Stdout, a.Stderr, want)
		}
		if len(d.asked) != 1 || d.asked[0].Vault != ws.Vault || d.asked[0].Server != sock || d.asked[0].Cwd != c.cwd {
			t.Errorf("%s: asked %+v", c.h, d.asked)
		}

		down := *ws
		down.Server = ""
		od := o
		od.Workspace = func(string) (*Workspace, error) { return &down, nil }
		d = &fakeDecider{verdict: verdict}
		a = Run(context.Background(), c.h, d, od, bytes.NewReader(readPayload(t, c.h, c.payload)))
		if len(d.asked) != 0 || !strings.Contains(string(a.Stdout)+a.Stderr, "avfs workspace up") || strings.Contains(string(a.Stdout), "proxy exec") {
			t.Errorf("%s, workspace down: asked %d, exit %d %s %s", c.h, len(d.asked), a.Exit, a.Stdout, a.Stderr)
		}
		if c.h != Codex && a.Exit != 2 {
			t.Errorf("%s, workspace down: exit %d, want the block (2)", c.h, a.Exit)
		}
	}
}
