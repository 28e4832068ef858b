package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"avfs/mount"
	"avfs/wire"
)

// Through the CLI: a run that adds a git hook is held (exit 126, the
// vault unchanged); `approval grant` applies exactly its changes without a
// second run; a previewed run that needs approval changes nothing until
// its grant merges it; `approval deny` of a held run discards it.
func TestEffectsThroughCLI(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	a.ok("vault", "create", "default")
	const hook = "mkdir -p .git/hooks && printf '#!/bin/sh\\nexit 0\\n' > .git/hooks/pre-push && echo done > note.txt"
	held := a.proxy([]string{"--shell", hook})
	if held.code != wire.ExitNotRun || held.env.Effects == nil || held.env.Effects.Outcome != wire.EffectsHeld || held.env.Approval == nil {
		t.Fatalf("held run: exit %d, effects %+v, approval %+v, error %+v", held.code, held.env.Effects, held.env.Approval, held.env.Error)
	}
	if r := a.json(nil, "cat", "/note.txt"); r.code == 0 {
		t.Fatalf("held changes reached the vault: %s", r.stdout)
	}
	granted := a.ok("approval", "grant", held.env.Approval.ID)
	if granted["status"] != "used" || len(granted["applied"].([]any)) != held.env.ChangesTotal {
		t.Fatalf("grant: %v", granted)
	}
	if got := a.ok("cat", "/.git/hooks/pre-push"); got["content_base64"] != base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\nexit 0\n")) {
		t.Fatalf("after the grant: %v", got)
	}

	again := a.proxy([]string{"--shell", "printf 'x' > .git/hooks/post-merge && echo again > note.txt"})
	if again.env.Approval == nil {
		t.Fatalf("second held run: %+v", again.env.Effects)
	}
	a.ok("approval", "deny", again.env.Approval.ID)
	if got := a.ok("cat", "/note.txt"); got["content_base64"] != base64.StdEncoding.EncodeToString([]byte("done\n")) && got["content"] != "done\n" {
		t.Fatalf("after the deny: %v", got)
	}

	preview := a.proxy([]string{"--preview"}, "curl", "-o", "page.html", "http://example.invalid/")
	if preview.code != wire.ExitNotRun || preview.env.Preview == nil || preview.env.Approval == nil || preview.env.Process == nil {
		t.Fatalf("preview: exit %d, preview %+v, approval %+v, process %+v, error %+v", preview.code, preview.env.Preview, preview.env.Approval, preview.env.Process, preview.env.Error)
	}
	a.ok("approval", "grant", preview.env.Approval.ID)
	if r := a.json(nil, "vault", "info", preview.env.Preview.Fork); r.code == 0 {
		t.Errorf("the preview's fork is still there after the grant: %s", r.stdout)
	}
}

// In a workspace, held changes wait off the project directory, and
// `approval grant` has the workspace's avfs apply them under its live
// mount: the host path shows them at once.
func TestHeldChangesInWorkspace(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	proj := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mount.IsMounted(proj) {
			a.exec(nil, "workspace", "down", proj, "--lazy")
		}
	})
	var up wire.WorkspaceStatus
	a.into(&up, "workspace", "up", proj)
	var env wire.Envelope
	r := a.exec(nil, "--json", "--vault", up.Vault, "proxy", "exec", "--shell", "mkdir -p .git/hooks && echo hook > .git/hooks/pre-push")
	if err := json.Unmarshal(r.stdout, &env); err != nil || env.Effects == nil || env.Effects.Outcome != wire.EffectsHeld || env.Approval == nil {
		t.Fatalf("held run in the workspace: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	hook := filepath.Join(proj, ".git", "hooks", "pre-push")
	if _, err := os.Stat(hook); !os.IsNotExist(err) {
		t.Fatalf("the held hook is on the host path: %v", err)
	}
	a.ok("--vault", up.Vault, "approval", "grant", env.Approval.ID)
	if b, err := os.ReadFile(hook); err != nil || string(b) != "hook\n" {
		t.Fatalf("after the grant: %q %v", b, err)
	}
	a.ok("workspace", "down", proj)
}
