package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"avfs/hooks"
	"avfs/mount"
	"avfs/wire"
)

// claudePayloadIn is a recorded Claude Code PreToolUse payload for
// command, with its cwd set to dir.
func claudePayloadIn(t *testing.T, dir, command string) []byte {
	t.Helper()
	var in hooks.ClaudeInput
	if err := json.Unmarshal(claudePayload(t, command), &in); err != nil {
		t.Fatal(err)
	}
	in.Cwd = dir
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWorkspace: one workspace, one path. `workspace up` imports a project
// directory into a vault and mounts the vault at that very directory; a
// harness's own file writes there land in the vault; the hook (whose
// payload's cwd is in the project) rewrites the command to run through the
// workspace's avfs, in a sandbox that shows the vault at the project's own
// path, so absolute host paths work; undo restores through that avfs and
// the host path shows it at once; `down --export` leaves the project
// directory holding the vault's files; a workspace that is down blocks the
// hook.
func TestWorkspace(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	proj := filepath.Join(t.TempDir(), "my proj")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(proj, "src"), 0o755))
	must(os.WriteFile(filepath.Join(proj, "src", "main.txt"), []byte("v1\n"), 0o644))
	t.Cleanup(func() {
		if mount.IsMounted(proj) {
			a.exec(nil, "workspace", "down", proj, "--lazy")
		}
	})

	var up wire.WorkspaceStatus
	a.into(&up, "workspace", "up", proj)
	if up.State != wire.WorkspaceUp || up.Imported == nil || up.Imported.Files != 1 || !strings.HasPrefix(up.Vault, "my-proj-") || up.PID == 0 {
		t.Fatalf("up: %+v", up)
	}
	if !mount.IsMounted(proj) {
		t.Fatal("the project directory is not mounted")
	}
	var again wire.WorkspaceStatus
	if a.into(&again, "workspace", "up", proj); !again.Already || again.PID != up.PID {
		t.Errorf("up twice: %+v", again)
	}
	vault := up.Vault

	// The harness's own file tool writes in the project directory: the vault has it.
	must(os.WriteFile(filepath.Join(proj, "src", "edit.txt"), []byte("edited by the harness\n"), 0o644))
	equal(t, "the vault's copy of the harness's write", a.cat("--vault", vault, "/src/edit.txt"), "edited by the harness\n")

	// The hook, with no --vault or --project: the cwd says which workspace.
	src := filepath.Join(proj, "src")
	command := "cat " + hooks.Quote(filepath.Join(src, "edit.txt")) + " && echo built > " + hooks.Quote(filepath.Join(src, "out.txt")) + " && pwd"
	r := a.exec(claudePayloadIn(t, src, command), "hook", "claude-code")
	var out hooks.ClaudeOutput
	if r.code != 0 || json.Unmarshal(r.stdout, &out) != nil {
		t.Fatalf("hook: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	ans := out.HookSpecificOutput
	if ans.PermissionDecision != hooks.ClaudeAllow || ans.UpdatedInput == nil ||
		!strings.Contains(ans.UpdatedInput.Command, "--vault "+vault+" --json proxy exec --server "+up.Socket+" --cwd /src ") {
		t.Fatalf("hook answer: %+v (stderr %s)", ans, r.stderr)
	}
	env, stdout := a.runRewrite(ans.UpdatedInput.Command)
	if env.Decision != wire.AllowWithCheckpoint || env.Error != nil || env.Process == nil || env.Checkpoint == nil {
		t.Fatalf("envelope: %s", stdout)
	}
	equal(t, "the run's output", env.Process.Stdout, "edited by the harness\n"+src+"\n")
	if env.Sandbox == nil || env.Sandbox.Workspace != proj || env.Mount == nil || env.Mount.Dir != proj {
		t.Errorf("the run did not see the vault at the project's path: sandbox %+v mount %+v", env.Sandbox, env.Mount)
	}
	if len(env.Changes) != 1 || env.Changes[0].Path != "/src/out.txt" {
		t.Errorf("changes: %+v", env.Changes)
	}
	b, err := os.ReadFile(filepath.Join(src, "out.txt"))
	equal(t, "the run's file on the host path", string(b), "built\n")
	must(err)

	// proxy exec of the workspace's vault goes through its avfs by itself.
	var ls wire.Envelope
	r = a.exec(nil, "--json", "--vault", vault, "proxy", "exec", "--cwd", "/src", "--", "ls")
	must(json.Unmarshal(r.stdout, &ls))
	if ls.Error != nil || ls.Process == nil || ls.Process.Stdout != "edit.txt\nmain.txt\nout.txt\n" {
		t.Fatalf("proxy exec in the workspace: %+v %+v", ls.Error, ls.Process)
	}

	// So does an MCP exec, and checkpoint_restore.
	s := a.mcpSession(nil)
	_, menv := execEnvelope(t, s, map[string]any{"vault": vault, "cwd": "/src", "shell": "echo mcp > mcp.txt && cat " + hooks.Quote(filepath.Join(src, "mcp.txt"))}, false)
	if menv.Process == nil || menv.Process.Stdout != "mcp\n" || menv.Checkpoint == nil || menv.Sandbox == nil || menv.Sandbox.Workspace != proj {
		t.Fatalf("mcp exec in the workspace: %+v", menv)
	}
	if res := call(t, s, "checkpoint_restore", map[string]any{"vault": vault, "checkpoint": strconv.FormatInt(menv.Checkpoint.ID, 10)}); res.IsError {
		t.Fatalf("mcp checkpoint_restore: %s", text(res))
	}
	if _, err := os.Stat(filepath.Join(src, "mcp.txt")); !os.IsNotExist(err) {
		t.Errorf("mcp.txt after the MCP restore: %v", err)
	}
	s.Close()

	// A failed run rolled back under the live mount: the host path shows
	// the vault as before at once.
	var rb wire.Envelope
	r = a.exec(nil, "--json", "--vault", vault, "proxy", "exec", "--rollback-on-failure", "--cwd", "/src", "--shell", "echo half > half.txt; rm main.txt; exit 3")
	must(json.Unmarshal(r.stdout, &rb))
	if rb.Rollback == nil || !rb.Rollback.Restored {
		t.Fatalf("rollback: %s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(src, "half.txt")); !os.IsNotExist(err) {
		t.Errorf("half.txt after the rollback: %v", err)
	}
	b, err = os.ReadFile(filepath.Join(src, "main.txt"))
	equal(t, "main.txt after the rollback", string(b), "v1\n")
	must(err)

	// Undo, as PostToolUse says: through the workspace's avfs, and the
	// host path shows it at once (the kernel's caches are told).
	a.ok("--vault", vault, "checkpoint", "restore", strconv.FormatInt(env.Checkpoint.ID, 10))
	if _, err := os.Stat(filepath.Join(src, "out.txt")); !os.IsNotExist(err) {
		t.Errorf("out.txt after undo: %v", err)
	}

	// Down, exported: the directory holds the vault's files, unmounted.
	var down wire.WorkspaceStatus
	a.into(&down, "workspace", "down", proj, "--export")
	if down.State != wire.WorkspaceDown || down.Exported == nil || mount.IsMounted(proj) {
		t.Fatalf("down: %+v (mounted %v)", down, mount.IsMounted(proj))
	}
	b, err = os.ReadFile(filepath.Join(src, "edit.txt"))
	equal(t, "the exported edit", string(b), "edited by the harness\n")
	must(err)

	// Down but bound: the hook blocks (its commands would not see what the
	// harness writes), and says how to bring it up.
	r = a.exec(claudePayloadIn(t, src, "ls"), "hook", "claude-code")
	if r.code != 2 || !strings.Contains(string(r.stderr), "is down") || !strings.Contains(string(r.stderr), "avfs workspace up") {
		t.Fatalf("hook while down: exit %d %s %s", r.code, r.stdout, r.stderr)
	}

	// Up again: the vault as it was, nothing imported.
	var up2 wire.WorkspaceStatus
	a.into(&up2, "workspace", "up", proj)
	if up2.Vault != vault || up2.Imported != nil {
		t.Errorf("up again: %+v", up2)
	}
	var list wire.WorkspaceList
	if a.into(&list, "workspace", "list"); len(list.Workspaces) != 1 || list.Workspaces[0].State != wire.WorkspaceUp {
		t.Errorf("list: %+v", list)
	}
	a.into(&down, "workspace", "down", proj, "--forget")
	if !down.Forgotten || mount.IsMounted(proj) {
		t.Errorf("down --forget: %+v", down)
	}
	if a.into(&list, "workspace", "list"); len(list.Workspaces) != 0 {
		t.Errorf("list after forget: %+v", list)
	}
}

// A directory that cannot be a workspace is refused, with nothing mounted.
func TestWorkspaceRefused(t *testing.T) {
	a := newAVFS(t)
	home, _ := os.UserHomeDir()
	for _, dir := range []string{"/", "/usr", "/tmp", home, a.home} {
		r := a.json(nil, "workspace", "up", dir)
		if r.code == 0 || !strings.Contains(string(r.stdout), string(wire.CodeInvalidInput)) {
			t.Errorf("workspace up %s: exit %d %s", dir, r.code, r.stdout)
		}
	}
}

// `hook install --workspace` brings the project up as its workspace first,
// so the settings it writes are the vault's like every other file.
func TestHookInstallWorkspace(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	proj := filepath.Join(t.TempDir(), "app")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mount.IsMounted(proj) {
			a.exec(nil, "workspace", "down", proj, "--lazy")
		}
	})
	var res hooks.InstallResult
	a.into(&res, "hook", "install", "claude-code", "--project", proj, "--workspace")
	if res.Workspace == nil || res.Workspace.State != wire.WorkspaceUp || !res.Changed || !mount.IsMounted(proj) {
		t.Fatalf("install: %+v (mounted %v)", res, mount.IsMounted(proj))
	}
	if got := a.cat("--vault", res.Workspace.Vault, "/.claude/settings.json"); !strings.Contains(got, "hook claude-code") {
		t.Errorf("the vault's settings: %q", got)
	}
	var again hooks.InstallResult
	if a.into(&again, "hook", "install", "claude-code", "--project", proj, "--workspace"); again.Changed || again.Workspace == nil || !again.Workspace.Already {
		t.Errorf("install twice: %+v", again)
	}
	var down wire.WorkspaceStatus
	a.into(&down, "workspace", "down", proj, "--export", "--forget")
	if b, err := os.ReadFile(filepath.Join(proj, ".claude", "settings.json")); err != nil || !strings.Contains(string(b), "hook claude-code") {
		t.Errorf("exported settings: %q %v", b, err)
	}
}
