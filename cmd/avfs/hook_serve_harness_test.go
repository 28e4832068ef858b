package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"avfs/hooks"
	"avfs/wire"
)

var updateHookServe = flag.Bool("update-hook-serve", false, "rewrite the golden files of the hooks through avfs serve")

// recordedPayload is a recorded payload of hooks/testdata with its shell
// command replaced.
func recordedPayload(t *testing.T, h hooks.Harness, name, command string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "hooks", "testdata", string(h), name))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["tool_input"].(map[string]any)["command"] = command
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	return b
}

var goldenApproval = regexp.MustCompile(`ap-[0-9a-z]+`)

// hookServeGolden compares an answer with testdata/hook-serve/NAME.json,
// with the binary, the socket and approval ids replaced by AVFS, SOCK and
// AP-ID.
func hookServeGolden(t *testing.T, name string, answer []byte, sock string) {
	t.Helper()
	got := bytes.ReplaceAll(answer, []byte(avfsBin), []byte("AVFS"))
	got = bytes.ReplaceAll(got, []byte(sock), []byte("SOCK"))
	got = goldenApproval.ReplaceAll(got, []byte("AP-ID"))
	path := filepath.Join("testdata", "hook-serve", name+".json")
	if *updateHookServe {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/avfs -run TestHookServe -update-hook-serve)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\ngot:  %s\nwant: %s", name, got, want)
	}
}

// serveHook runs `avfs hook h --server SOCK` on payload; it must exit 0
// and not decide in-process.
func (a *avfs) serveHook(h hooks.Harness, sock string, payload []byte) []byte {
	a.t.Helper()
	r := a.exec(payload, "--vault", "hooked", "hook", string(h), "--project", "/home/u/proj", "--server", sock)
	if r.code != 0 || strings.Contains(string(r.stderr), "in-process") {
		a.t.Fatalf("hook %s: exit %d stdout %q stderr %q", h, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// TestHookServeCodexGemini feeds recorded Codex and Gemini payloads to
// `avfs hook codex|gemini --server SOCK`, checks the answers, and runs the
// rewritten commands as the harness would (sh -c): they run through the
// daemon, in the vault directory of the payload's cwd.
func TestHookServeCodexGemini(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	writeApprovalBundle(t, filepath.Join(a.home, "policy"))
	a.ok("vault", "create", "hooked")
	a.ok("--vault", "hooked", "mkdir", "/web") // Gemini's payload runs in cwd/web
	d := a.serve()

	runs := func(rewrite string) (*wire.Envelope, []byte) {
		t.Helper()
		before := d.status().RunsTotal
		env, raw := a.runRewrite(rewrite)
		if st := d.status(); st.RunsTotal != before+1 {
			t.Fatalf("the rewrite did not run through the daemon (%d runs, had %d): %s", st.RunsTotal, before, raw)
		}
		return env, raw
	}

	// Codex: allow_with_checkpoint, rewritten to proxy exec --server.
	ans := a.serveHook(hooks.Codex, d.sock, recordedPayload(t, hooks.Codex, "pre_bash.json", "echo served > out.txt && cat out.txt"))
	hookServeGolden(t, "codex_allow_with_checkpoint", ans, d.sock)
	var codex hooks.CodexOutput
	if err := json.Unmarshal(ans, &codex); err != nil || codex.HookSpecificOutput.UpdatedInput == nil {
		t.Fatalf("%s %v", ans, err)
	}
	rewrite := codex.HookSpecificOutput.UpdatedInput.Command
	env, raw := runs(rewrite)
	if env.Decision != wire.AllowWithCheckpoint || env.Vault != "hooked" || env.Process == nil || env.Process.Stdout != "served\n" ||
		env.Command.Cwd != "/" || env.Checkpoint == nil {
		t.Fatalf("envelope: %s", raw)
	}
	equal(t, "the vault's file", a.cat("--vault", "hooked", "/out.txt"), "served\n")
	// Codex's PermissionRequest for that rewrite: allowed (proxy exec decides again).
	perm := recordedPayload(t, hooks.Codex, "permission_request.json", rewrite)
	hookServeGolden(t, "codex_permission_rewrite", a.serveHook(hooks.Codex, d.sock, perm), d.sock)
	// deny: nothing to run.
	hookServeGolden(t, "codex_deny", a.serveHook(hooks.Codex, d.sock, recordedPayload(t, hooks.Codex, "pre_bash.json", "cat /var/log/syslog")), d.sock)

	// Codex and require_approval: a deny naming the pending approval the
	// daemon created; once granted, an allow with --approval that the
	// daemon runs.
	touch := recordedPayload(t, hooks.Codex, "pre_bash.json", "touch approved.txt")
	pending := a.serveHook(hooks.Codex, d.sock, touch)
	hookServeGolden(t, "codex_pending", pending, d.sock)
	id := goldenApproval.Find(pending)
	if id == nil {
		t.Fatalf("no approval id: %s", pending)
	}
	a.ok("--vault", "hooked", "approval", "grant", string(id))
	granted := a.serveHook(hooks.Codex, d.sock, touch)
	hookServeGolden(t, "codex_approval_granted", granted, d.sock)
	if err := json.Unmarshal(granted, &codex); err != nil || codex.HookSpecificOutput.UpdatedInput == nil {
		t.Fatalf("%s %v", granted, err)
	}
	if env, raw := runs(codex.HookSpecificOutput.UpdatedInput.Command); env.Approval == nil || env.Approval.ID != string(id) ||
		env.Approval.Status != "used" || env.Process == nil || env.Process.ExitCode != 0 {
		t.Fatalf("approved run: %s", raw)
	}

	// Gemini: the directory of the call is the vault's /web.
	ans = a.serveHook(hooks.Gemini, d.sock, recordedPayload(t, hooks.Gemini, "before_shell.json", "echo gem > g.txt && cat g.txt"))
	hookServeGolden(t, "gemini_allow_with_checkpoint", ans, d.sock)
	var gem hooks.GeminiOutput
	if err := json.Unmarshal(ans, &gem); err != nil || gem.Decision != hooks.GeminiAllow || gem.HookSpecificOutput == nil {
		t.Fatalf("%s %v", ans, err)
	}
	env, raw = runs(gem.HookSpecificOutput.ToolInput.Command)
	if env.Decision != wire.AllowWithCheckpoint || env.Process == nil || env.Process.Stdout != "gem\n" || env.Command.Cwd != "/web" {
		t.Fatalf("envelope: %s", raw)
	}
	equal(t, "the vault's file", a.cat("--vault", "hooked", "/web/g.txt"), "gem\n")
	hookServeGolden(t, "gemini_deny", a.serveHook(hooks.Gemini, d.sock, recordedPayload(t, hooks.Gemini, "before_shell.json", "cat /var/log/syslog")), d.sock)
	// Gemini and require_approval: a deny naming the pending approval.
	pending = a.serveHook(hooks.Gemini, d.sock, recordedPayload(t, hooks.Gemini, "before_shell.json", "touch later.txt"))
	hookServeGolden(t, "gemini_pending", pending, d.sock)
}

// post sends body to path of the daemon, with header pairs.
func (d *daemon) post(path string, body []byte, header ...string) (int, []byte) {
	d.t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
	}}}
	return postTo(d.t, c, "http://avfs"+path, body, header...)
}

func postTo(t *testing.T, c *http.Client, url string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestHookHTTPSameAsCommand: POST /v1/hooks/HARNESS of a real avfs serve
// answers byte for byte what `avfs hook HARNESS --server SOCK` prints, for
// every harness, and its rewrite runs through the daemon.
func TestHookHTTPSameAsCommand(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	a.ok("vault", "create", "hooked")
	a.ok("--vault", "hooked", "mkdir", "/src")
	a.ok("--vault", "hooked", "mkdir", "/web")
	d := a.serve()
	for _, tc := range []struct {
		h       hooks.Harness
		payload []byte
	}{
		{hooks.ClaudeCode, claudePayload(t, "echo http > h.txt && cat h.txt")},
		{hooks.ClaudeCode, claudePayload(t, "cat /var/log/syslog")},
		{hooks.ClaudeCode, recordedPayload(t, hooks.ClaudeCode, "permission_request.json", "cat /var/log/syslog")},
		{hooks.Codex, recordedPayload(t, hooks.Codex, "pre_bash.json", "ls")},
		{hooks.Gemini, recordedPayload(t, hooks.Gemini, "before_shell.json", "ls")},
	} {
		cmd := a.serveHook(tc.h, d.sock, tc.payload)
		status, body := d.post("/v1/hooks/"+string(tc.h)+"?vault=hooked&project=/home/u/proj", tc.payload)
		if status != http.StatusOK || !bytes.Equal(body, cmd) {
			t.Errorf("%s: HTTP %d\nhttp:    %s\ncommand: %s", tc.h, status, body, cmd)
		}
	}
	status, body := d.post("/v1/hooks/claude-code?vault=hooked&project=/home/u/proj", claudePayload(t, "echo http > h.txt && cat h.txt"))
	var out hooks.ClaudeOutput
	if err := json.Unmarshal(body, &out); status != http.StatusOK || err != nil || out.HookSpecificOutput.UpdatedInput == nil {
		t.Fatalf("HTTP %d: %s", status, body)
	}
	before := d.status().RunsTotal
	env, raw := a.runRewrite(out.HookSpecificOutput.UpdatedInput.Command)
	if env.Process == nil || env.Process.Stdout != "http\n" || env.Command.Cwd != "/src" || d.status().RunsTotal != before+1 {
		t.Fatalf("envelope: %s", raw)
	}
}

// freePort is a TCP port of 127.0.0.1 nobody listens on (as far as can be
// known).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestHookHTTPOverTCP: a daemon on TCP with a token, as Claude Code's
// HTTP hooks reach it. A hook without the token is blocked (status 200);
// with it, the rewrite names tcp:127.0.0.1:PORT, and the harness's shell
// runs it through the daemon with the token in $AVFS_TOKEN. Without the
// token the daemon refuses the run and it runs in-process, said on
// stderr.
func TestHookHTTPOverTCP(t *testing.T) {
	requireFUSE(t)
	a := newProxyAVFS(t)
	a.ok("vault", "create", "hooked")
	a.ok("--vault", "hooked", "mkdir", "/src")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + freePort(t)
	cmd := a.command("serve", "--listen", "tcp:"+addr, "--token-file", tokenFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	client := &http.Client{Timeout: 10 * time.Second}
	auth := []string{"Authorization", "Bearer s3cret"}
	status := func() wire.ServeStatus {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/status", nil)
		req.Header.Set(auth[0], auth[1])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st wire.ServeStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("avfs serve ended: %v: %s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("avfs serve does not answer: %s", stderr.String())
		}
	}
	url := "http://" + addr + "/v1/hooks/claude-code?vault=hooked&project=/home/u/proj"
	payload := claudePayload(t, "echo tcp > t.txt && cat t.txt")

	code, body := postTo(t, client, url, payload, "Authorization", "Bearer wrong")
	var out hooks.ClaudeOutput
	if err := json.Unmarshal(body, &out); code != http.StatusOK || err != nil || out.HookSpecificOutput.PermissionDecision != hooks.ClaudeDeny ||
		!strings.Contains(out.HookSpecificOutput.PermissionDecisionReason, "bearer token") {
		t.Fatalf("wrong token: HTTP %d %s", code, body)
	}

	code, body = postTo(t, client, url, payload, auth...)
	if err := json.Unmarshal(body, &out); code != http.StatusOK || err != nil || out.HookSpecificOutput.UpdatedInput == nil ||
		!strings.Contains(out.HookSpecificOutput.UpdatedInput.Command, " --server tcp:"+addr+" ") {
		t.Fatalf("HTTP %d %s", code, body)
	}
	rewrite := out.HookSpecificOutput.UpdatedInput.Command
	if strings.Contains(rewrite, "s3cret") {
		t.Fatalf("the token is in the rewrite: %s", rewrite)
	}
	// The command hook through the same daemon on TCP, with the token:
	// decided by the daemon, the same answer. Without it: blocked (the
	// daemon answered an error), never decided elsewhere.
	a.env = append(a.env, "AVFS_TOKEN=s3cret")
	if r := a.exec(payload, "--vault", "hooked", "hook", "claude-code", "--project", "/home/u/proj", "--server", "tcp:"+addr); r.code != 0 ||
		!bytes.Equal(r.stdout, body) || len(r.stderr) != 0 {
		t.Fatalf("hook --server tcp: exit %d stderr %q\ncommand: %s\nhttp:    %s", r.code, r.stderr, r.stdout, body)
	}
	a.env = a.env[:len(a.env)-1]
	if r := a.exec(payload, "--vault", "hooked", "hook", "claude-code", "--server", "tcp:"+addr); r.code != 2 || !strings.Contains(string(r.stderr), "bearer token") {
		t.Fatalf("hook --server tcp: without the token: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	before := status().RunsTotal
	a.env = append(a.env, "AVFS_TOKEN=s3cret")
	env, raw := a.runRewrite(rewrite)
	if env.Process == nil || env.Process.Stdout != "tcp\n" || env.Command.Cwd != "/src" || status().RunsTotal != before+1 {
		t.Fatalf("through the daemon: %s", raw)
	}
	// The hook `hook install --http` writes, as Claude Code would post it
	// (the header's $AVFS_TOKEN interpolated): the daemon takes its query.
	proj := t.TempDir()
	a.ok("--vault", "hooked", "hook", "install", "claude-code", "--http", "http://"+addr, "--project", proj)
	settings, err := os.ReadFile(filepath.Join(proj, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks map[string][]hooks.HookGroup `json:"hooks"`
	}
	if err := json.Unmarshal(settings, &doc); err != nil || len(doc.Hooks["PreToolUse"]) != 1 || len(doc.Hooks["PreToolUse"][0].Hooks) != 1 {
		t.Fatalf("%s %v", settings, err)
	}
	installed := doc.Hooks["PreToolUse"][0].Hooks[0]
	if installed.Type != "http" || !slices.Equal(installed.AllowedEnvVars, []string{"AVFS_TOKEN"}) {
		t.Fatalf("installed: %+v", installed)
	}
	var headers []string
	for k, v := range installed.Headers {
		headers = append(headers, k, strings.ReplaceAll(v, "$AVFS_TOKEN", "s3cret"))
	}
	inProj, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": filepath.Join(proj, "src"), "hook_event_name": "PreToolUse",
		"tool_name": "Bash", "tool_input": map[string]any{"command": "ls"}})
	code, body = postTo(t, client, installed.URL, inProj, headers...)
	if err := json.Unmarshal(body, &out); code != http.StatusOK || err != nil || out.HookSpecificOutput.UpdatedInput == nil ||
		!strings.Contains(out.HookSpecificOutput.UpdatedInput.Command, "--vault hooked ") || !strings.Contains(out.HookSpecificOutput.UpdatedInput.Command, " --cwd /src ") {
		t.Fatalf("the installed hook: HTTP %d %s", code, body)
	}

	// The harness's shell without the token: the daemon refuses, the run is in-process.
	a.env = a.env[:len(a.env)-1]
	sh := a.command()
	sh.Path, sh.Args = "/bin/sh", []string{"/bin/sh", "-c", rewrite}
	var so, se bytes.Buffer
	sh.Stdout, sh.Stderr = &so, &se
	_ = sh.Run()
	if err := json.Unmarshal(so.Bytes(), env); err != nil || env.Process == nil || env.Process.Stdout != "tcp\n" ||
		!strings.Contains(se.String(), "HTTP 401") || status().RunsTotal != before+1 {
		t.Fatalf("without the token: %s %s", so.Bytes(), se.Bytes())
	}
}
