package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"avfs/hooks"
	"avfs/wire"
)

// TestHookServe: `avfs hook claude-code --server SOCK` decides through
// avfs serve (POST /v1/precheck) and rewrites the command to run through
// it; without a daemon it decides in-process, says so on stderr only,
// and answers as it would have.
func TestHookServe(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	d := a.serve()
	a.ok("vault", "create", "hooked")
	a.ok("--vault", "hooked", "mkdir", "/src") // the payload's cwd is /home/u/proj/src
	hook := func(server, command string) (hooks.ClaudeHookOutput, string) {
		t.Helper()
		r := a.exec(claudePayload(t, command), "--vault", "hooked", "hook", "claude-code", "--project", "/home/u/proj", "--server", server)
		var out hooks.ClaudeOutput
		if r.code != 0 || json.Unmarshal(r.stdout, &out) != nil {
			t.Fatalf("hook: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		return out.HookSpecificOutput, string(r.stderr)
	}

	ans, stderr := hook(d.sock, "echo served > out.txt && cat out.txt")
	if strings.Contains(stderr, "in-process") {
		t.Fatalf("not decided by the daemon: %s", stderr)
	}
	if ans.PermissionDecision != hooks.ClaudeAllow || ans.UpdatedInput == nil || !strings.Contains(ans.UpdatedInput.Command, " proxy exec --server "+d.sock+" --cwd /src ") {
		t.Fatalf("answer: %+v", ans)
	}
	before := d.status().RunsTotal
	env, stdout := a.runRewrite(ans.UpdatedInput.Command)
	if env.Decision != wire.AllowWithCheckpoint || env.Vault != "hooked" || env.Process == nil || env.Process.Stdout != "served\n" || env.Command.Cwd != "/src" {
		t.Fatalf("envelope: %s", stdout)
	}
	if st := d.status(); st.RunsTotal != before+1 {
		t.Fatalf("the rewrite did not run through the daemon: %d runs, had %d", st.RunsTotal, before)
	}
	equal(t, "the vault's file", a.cat("--vault", "hooked", "/src/out.txt"), "served\n")

	// deny through the daemon: the rule, nothing to run.
	if ans, _ := hook(d.sock, "cat /var/log/syslog"); ans.PermissionDecision != hooks.ClaudeDeny || ans.UpdatedInput != nil || !strings.Contains(ans.PermissionDecisionReason, "avfs.deny.") {
		t.Fatalf("deny: %+v", ans)
	}

	// No daemon on the socket: decided in-process, the same answer, said
	// on stderr; the rewrite still names the socket (and runs in-process).
	none := filepath.Join(t.TempDir(), "none.sock")
	ans, stderr = hook(none, "echo local")
	if !strings.Contains(stderr, "is not answering") || !strings.Contains(stderr, "deciding in-process") {
		t.Fatalf("fallback not said: %q", stderr)
	}
	if ans.PermissionDecision != hooks.ClaudeAllow || ans.UpdatedInput == nil || !strings.Contains(ans.UpdatedInput.Command, " --server "+none+" ") {
		t.Fatalf("fallback answer: %+v", ans)
	}
	if env, stdout := a.runRewrite(ans.UpdatedInput.Command); env.Decision != wire.Allow || env.Process == nil || env.Process.Stdout != "local\n" {
		t.Fatalf("fallback envelope: %s", stdout)
	}
	if ans, stderr := hook(none, "cat /var/log/syslog"); ans.PermissionDecision != hooks.ClaudeDeny || !strings.Contains(stderr, "deciding in-process") {
		t.Fatalf("fallback deny: %+v %q", ans, stderr)
	}
}
