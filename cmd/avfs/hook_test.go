package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"avfs/hooks"
	"avfs/wire"
)

// claudePayload is the recorded Claude Code PreToolUse payload with its
// command replaced.
func claudePayload(t *testing.T, command string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "hooks", "testdata", "claude-code", "pre_bash.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in hooks.ClaudeInput
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	var bash hooks.ClaudeBashInput
	if err := json.Unmarshal(in.ToolInput, &bash); err != nil {
		t.Fatal(err)
	}
	bash.Command = command
	if in.ToolInput, err = json.Marshal(bash); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// claudeHook runs `avfs hook claude-code` on payload; it must exit 0 with
// one answer.
func (a *avfs) claudeHook(payload []byte, args ...string) hooks.ClaudeHookOutput {
	a.t.Helper()
	r := a.exec(payload, append([]string{"--vault", "hooked", "hook", "claude-code", "--project", "/home/u/proj"}, args...)...)
	var out hooks.ClaudeOutput
	if r.code != 0 || json.Unmarshal(r.stdout, &out) != nil {
		a.t.Fatalf("hook: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	return out.HookSpecificOutput
}

// runRewrite runs a rewritten command as Claude Code would: sh -c.
func (a *avfs) runRewrite(command string) (*wire.Envelope, []byte) {
	a.t.Helper()
	cmd := a.command()
	cmd.Path, cmd.Args = "/bin/sh", []string{"/bin/sh", "-c", command}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run() // the envelope says how it went
	var env wire.Envelope
	if err := json.Unmarshal(out.Bytes(), &env); err != nil {
		a.t.Fatalf("%s: no envelope (%v): %q stderr %q", command, err, out.Bytes(), errb.Bytes())
	}
	return &env, out.Bytes()
}

// TestHookClaudeCodeEndToEnd feeds a recorded PreToolUse payload to the
// binary, runs the rewritten command with sh -c (it runs through proxy
// exec in the vault and prints the envelope), and feeds that to
// PostToolUse.
func TestHookClaudeCodeEndToEnd(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	a.ok("vault", "create", "hooked")
	a.ok("--vault", "hooked", "mkdir", "/src") // the payload's cwd is /home/u/proj/src

	ans := a.claudeHook(claudePayload(t, "echo 'it''s' > out.txt && cat out.txt"))
	if ans.HookEventName != "PreToolUse" || ans.PermissionDecision != hooks.ClaudeAllow || ans.UpdatedInput == nil {
		t.Fatalf("answer: %+v", ans)
	}
	in := ans.UpdatedInput
	if in.Description != "Write and show out.txt" || in.Timeout == nil || *in.Timeout != 120000 || in.RunInBackground == nil || *in.RunInBackground {
		t.Errorf("updatedInput lost the tool's other fields: %+v", in)
	}
	if !strings.Contains(in.Command, " proxy exec ") || !strings.Contains(in.Command, "--vault hooked") {
		t.Errorf("rewrite: %s", in.Command)
	}
	env, stdout := a.runRewrite(in.Command)
	if env.Decision != wire.AllowWithCheckpoint || env.Vault != "hooked" || env.Process == nil || env.Process.Stdout != "its\n" ||
		env.Command.Cwd != "/src" || env.Checkpoint == nil || len(env.Changes) != 1 || env.Changes[0].Path != "/src/out.txt" {
		t.Fatalf("envelope: %s", stdout)
	}
	equal(t, "the vault's file", a.cat("--vault", "hooked", "/src/out.txt"), "its\n")

	// PostToolUse with that output: the checkpoint, the changes, the undo.
	resp, _ := json.Marshal(hooks.ClaudeBashResponse{Stdout: string(stdout)})
	post, _ := json.Marshal(hooks.ClaudeInput{SessionID: "abc123", Cwd: "/home/u/proj/src", HookEventName: "PostToolUse", ToolName: "Bash",
		ToolInput: json.RawMessage(`{"command":"x"}`), ToolResponse: resp})
	pa := a.claudeHook(post)
	for _, s := range []string{"/src/out.txt (added)", "checkpoint restore", env.ID} {
		if !strings.Contains(pa.AdditionalContext, s) {
			t.Errorf("additionalContext lacks %q: %q", s, pa.AdditionalContext)
		}
	}

	// deny: blocked with the rule, nothing runs.
	ans = a.claudeHook(claudePayload(t, "cat /var/log/syslog"))
	if ans.PermissionDecision != hooks.ClaudeDeny || ans.UpdatedInput != nil || !strings.Contains(ans.PermissionDecisionReason, "avfs.deny.") {
		t.Fatalf("deny: %+v", ans)
	}
}

// TestHookApproval: require_approval asks (defer when headless) naming a
// pending approval; once a person grants it, the re-fired hook allows the
// command with --approval, which proxy exec accepts.
func TestHookApproval(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	writeApprovalBundle(t, filepath.Join(a.home, "policy"))
	a.ok("vault", "create", "hooked")
	a.ok("--vault", "hooked", "mkdir", "/src")
	payload := claudePayload(t, "touch approved.txt")

	ans := a.claudeHook(payload)
	if ans.PermissionDecision != hooks.ClaudeAsk || ans.UpdatedInput == nil {
		t.Fatalf("ask: %+v", ans)
	}
	var list approvalListDoc
	a.into(&list, "--vault", "hooked", "approval", "list", "--status", "pending")
	if len(list.Approvals) != 1 || !strings.Contains(ans.PermissionDecisionReason, list.Approvals[0].ID) {
		t.Fatalf("approvals %+v, reason %q", list, ans.PermissionDecisionReason)
	}
	id := list.Approvals[0].ID
	// Fired again, headless: the same pending approval, deferred.
	if again := a.claudeHook(payload, "--headless"); again.PermissionDecision != hooks.ClaudeDefer || !strings.Contains(again.PermissionDecisionReason, id) {
		t.Fatalf("defer: %+v", again)
	}
	// Codex: deny naming the approval and how to grant it.
	codex := a.exec([]byte(`{"session_id":"s","cwd":"/home/u/proj/src","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"touch approved.txt"}}`),
		"--vault", "hooked", "hook", "codex", "--project", "/home/u/proj")
	if codex.code != 0 || !bytes.Contains(codex.stdout, []byte(`"permissionDecision":"deny"`)) || !bytes.Contains(codex.stdout, []byte("approval grant "+id)) {
		t.Fatalf("codex: %d %s %s", codex.code, codex.stdout, codex.stderr)
	}

	a.ok("--vault", "hooked", "approval", "grant", id)
	ans = a.claudeHook(payload)
	if ans.PermissionDecision != hooks.ClaudeAllow || !strings.Contains(ans.UpdatedInput.Command, "--approval "+id) {
		t.Fatalf("granted: %+v", ans)
	}
	// The permission dialog for that rewrite: approved, since the approval is granted.
	ti, _ := json.Marshal(hooks.ClaudeBashInput{Command: ans.UpdatedInput.Command})
	perm, _ := json.Marshal(hooks.ClaudeInput{Cwd: "/home/u/proj/src", HookEventName: "PermissionRequest", ToolName: "Bash", ToolInput: ti})
	pr := a.exec(perm, "--vault", "hooked", "hook", "claude-code", "--project", "/home/u/proj")
	if pr.code != 0 || !bytes.Contains(pr.stdout, []byte(`"behavior":"allow"`)) {
		t.Fatalf("permission request: %d %s %s", pr.code, pr.stdout, pr.stderr)
	}
	env, raw := a.runRewrite(ans.UpdatedInput.Command)
	if env.Approval == nil || env.Approval.ID != id || env.Approval.Status != "used" || env.Process == nil || env.Process.ExitCode != 0 {
		t.Fatalf("approved run: %s", raw)
	}
}

// TestHookFailClosed: a broken bundle, garbage and an unknown event
// block the call in every harness's own way.
func TestHookFailClosed(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	a.ok("vault", "create", "hooked")
	payload := claudePayload(t, "ls")

	r := a.exec([]byte("garbage"), "hook", "claude-code")
	if r.code != 2 || len(r.stdout) != 0 || !strings.Contains(string(r.stderr), "not valid JSON") {
		t.Fatalf("garbage: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = a.exec([]byte("garbage"), "hook", "gemini")
	if r.code != 2 || !strings.Contains(string(r.stderr), "blocked") {
		t.Fatalf("gemini garbage: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = a.exec([]byte("garbage"), "hook", "codex")
	if r.code != 0 || !bytes.Contains(r.stdout, []byte(`"permissionDecision":"deny"`)) {
		t.Fatalf("codex garbage: %d %q %q", r.code, r.stdout, r.stderr)
	}

	policy := filepath.Join(a.home, "policy")
	if err := os.MkdirAll(policy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(policy, "broken.rego"), []byte("package avfs.broken\n\nthis is not rego {"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = a.exec(payload, "--vault", "hooked", "hook", "claude-code")
	if r.code != 2 || len(r.stdout) != 0 || !strings.Contains(string(r.stderr), "blocked") {
		t.Fatalf("broken bundle: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestHookInstallCLI(t *testing.T) {
	t.Parallel()
	a := newAVFS(t)
	dir := t.TempDir()
	var res hooks.InstallResult
	a.into(&res, "hook", "install", "claude-code", "--project", dir, "--dry-run")
	if !res.Changed || !res.DryRun || !strings.Contains(string(res.Settings), "hook claude-code") {
		t.Fatalf("dry run: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, ".claude")); !os.IsNotExist(err) {
		t.Fatal("a dry run wrote")
	}
	a.into(&res, "hook", "install", "claude-code", "--project", dir)
	b, err := os.ReadFile(filepath.Join(dir, ".claude", "settings.json"))
	if err != nil || !res.Changed || !strings.Contains(string(b), avfsBin+" hook claude-code") {
		t.Fatalf("install: %+v %s %v", res, b, err)
	}
	a.into(&res, "hook", "install", "claude-code", "--project", dir)
	if res.Changed {
		t.Fatal("second install changed the file")
	}
	// The command the settings name answers a hook.
	var doc struct {
		Hooks map[string][]hooks.HookGroup `json:"hooks"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Hooks["PreToolUse"]) != 1 {
		t.Fatalf("%s %v", b, err)
	}
	cmd := a.command()
	cmd.Path, cmd.Args = "/bin/sh", []string{"/bin/sh", "-c", doc.Hooks["PreToolUse"][0].Hooks[0].Command}
	cmd.Stdin = bytes.NewReader(claudePayload(t, "ls"))
	out, err := cmd.Output()
	if err != nil || !bytes.Contains(out, []byte(`"permissionDecision":"allow"`)) {
		t.Fatalf("installed hook: %s %v", out, err)
	}

	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), []byte("{oops"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.fail(wire.ExitCode(wire.CodeInvalidInput), string(wire.CodeInvalidInput), "hook", "install", "claude-code", "--project", dir)
	a.fail(2, string(wire.CodeUsage), "hook", "install", "emacs", "--project", dir)
}

// TestHookFailsClosedBeforeDeciding: when avfs cannot even start the hook
// (no home to read its state from, a flag it does not know), each
// harness still gets its blocking answer, never an exit status it takes
// for "run it".
func TestHookFailsClosedBeforeDeciding(t *testing.T) {
	t.Parallel()
	payload := claudePayload(t, "ls")
	run := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(avfsBin, args...)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(payload)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}
	noHome := []string{"PATH=" + os.Getenv("PATH")} // neither HOME nor AVFS_HOME
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"no home", noHome, nil},
		{"an unknown flag", append(noHome, "AVFS_HOME="+t.TempDir()), []string{"--no-such-flag"}},
	} {
		for _, h := range []string{"claude-code", "gemini", "codex"} {
			code, stdout, stderr := run(tc.env, append([]string{"hook", h}, tc.args...)...)
			if h == "codex" {
				if code != 0 || !strings.Contains(stdout, `"permissionDecision":"deny"`) || !strings.Contains(stdout, "blocked") {
					t.Errorf("%s, %s: %d %q %q", tc.name, h, code, stdout, stderr)
				}
				continue
			}
			if code != 2 || stdout != "" || !strings.Contains(stderr, "blocked") {
				t.Errorf("%s, %s: %d %q %q", tc.name, h, code, stdout, stderr)
			}
		}
	}
}
