package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"avfs/hooks"
	"avfs/vault"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testExe is the avfs binary the hook tests' rewrites name.
const testExe = "/usr/local/bin/avfs"

// startHookServer is startServer with the hook endpoints configured: the
// rewrites run testExe through hookServer ("" for the listen address).
func startHookServer(t *testing.T, token []byte, addr, hookServer string) *testServer {
	t.Helper()
	ts := &testServer{t: t, home: t.TempDir(), bundle: t.TempDir(), done: make(chan error, 1)}
	writeBundle(t, ts.bundle, "servetest-1", "")
	srv, err := New(context.Background(), Config{Load: loader(ts.home, ts.bundle), Poll: -1, Token: token, Version: "test",
		Hooks: HookConfig{Exe: testExe, Server: hookServer}})
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = srv
	if addr == "" {
		addr = "unix:" + filepath.Join(t.TempDir(), "avfs.sock")
	}
	ln, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, ts.cancel = context.WithCancel(context.Background())
	go func() { ts.done <- srv.Serve(ctx, ln); ln.Close() }()
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		ts.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
		ts.base = "http://avfs"
	} else {
		ts.client, ts.base = http.DefaultClient, "http://"+ln.Addr().String()
	}
	t.Cleanup(ts.stop)
	return ts
}

// post sends a raw body to path and returns the status, the
// Content-Type and the answer.
func (ts *testServer) post(path string, body io.Reader, header ...string) (int, string, []byte) {
	ts.t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.base+path, body)
	if err != nil {
		ts.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// recorded is a recorded hook payload of hooks/testdata with its shell
// command replaced (command "" keeps the payload's).
func recorded(t *testing.T, h hooks.Harness, name, command string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "hooks", "testdata", string(h), name))
	if err != nil {
		t.Fatal(err)
	}
	if command == "" {
		return b
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

var approvalID = regexp.MustCompile(`ap-[0-9a-z]+`)

// hookGolden compares a hook answer with testdata/hooks/NAME.json, the
// approval ids replaced by AP-ID.
func hookGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	got := approvalID.ReplaceAll(body, []byte("AP-ID"))
	path := filepath.Join("testdata", "hooks", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./server -run Hook -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\ngot:  %s\nwant: %s", name, got, want)
	}
}

// TestHookEndpoint posts recorded payloads of the three harnesses to
// POST /v1/hooks/HARNESS: each decision's answer, always status 200.
func TestHookEndpoint(t *testing.T) {
	ts := startHookServer(t, nil, "", "/run/avfs/avfs.sock")
	ts.create("hooked")
	v, err := vault.NewStore(ts.home, vault.Options{}).Open(context.Background(), "hooked")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Mkdir(context.Background(), "/src", 0o755, false); err != nil {
		t.Fatal(err)
	}
	v.Close()
	const q = "?vault=hooked&project=/home/u/proj"
	for _, tc := range []struct {
		name    string
		h       hooks.Harness
		query   string
		payload []byte
	}{
		{"claude_allow", hooks.ClaudeCode, q, recorded(t, hooks.ClaudeCode, "pre_bash.json", "ls")},
		{"claude_allow_with_checkpoint", hooks.ClaudeCode, q, recorded(t, hooks.ClaudeCode, "pre_bash.json", "")},
		{"claude_deny", hooks.ClaudeCode, q, recorded(t, hooks.ClaudeCode, "pre_bash.json", "rm -rf /")},
		{"claude_ask", hooks.ClaudeCode, q, recorded(t, hooks.ClaudeCode, "pre_bash.json", "touch new.txt")},
		{"claude_defer", hooks.ClaudeCode, q + "&headless=1", recorded(t, hooks.ClaudeCode, "pre_bash.json", "touch new.txt")},
		{"claude_permission_deny", hooks.ClaudeCode, q, recorded(t, hooks.ClaudeCode, "permission_request.json", "rm -rf /")},
		{"claude_no_opinion", hooks.ClaudeCode, q, recorded(t, hooks.ClaudeCode, "pre_edit.json", "")},
		{"claude_post_tool_use", hooks.ClaudeCode, q, recorded(t, hooks.ClaudeCode, "post_bash_envelope.json", "")},
		{"codex_allow", hooks.Codex, q, recorded(t, hooks.Codex, "pre_bash.json", "")},
		{"codex_pending", hooks.Codex, q, recorded(t, hooks.Codex, "pre_bash.json", "touch new.txt")},
		{"gemini_allow", hooks.Gemini, q, recorded(t, hooks.Gemini, "before_shell.json", "ls")},
		{"gemini_deny", hooks.Gemini, q, recorded(t, hooks.Gemini, "before_shell.json", "rm -rf /")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, ctype, body := ts.post("/v1/hooks/"+string(tc.h)+tc.query, bytes.NewReader(tc.payload))
			if status != http.StatusOK || ctype != "application/json" && len(body) > 0 {
				t.Fatalf("HTTP %d %s: %s", status, ctype, body)
			}
			hookGolden(t, tc.name, body)
		})
	}
}

// TestHookEndpointFailsClosed: whatever cannot be answered is the
// harness's blocking answer with status 200, never an error status (which
// Claude Code takes for "go on").
func TestHookEndpointFailsClosed(t *testing.T) {
	ts := startHookServer(t, []byte("s3cret"), "tcp:127.0.0.1:0", "")
	auth := []string{"Authorization", "Bearer s3cret"}
	pre := recorded(t, hooks.ClaudeCode, "pre_bash.json", "ls")
	perm := recorded(t, hooks.ClaudeCode, "permission_request.json", "")
	for _, tc := range []struct {
		name   string
		h      hooks.Harness
		query  string
		body   io.Reader
		header []string
		want   string // in the reason
	}{
		{"garbage", hooks.ClaudeCode, "", strings.NewReader("this is not json"), auth, "not valid JSON"},
		{"oversized", hooks.ClaudeCode, "", io.MultiReader(strings.NewReader(`{"hook_event_name":"PermissionRequest","tool_input":{"command":"`),
			strings.NewReader(strings.Repeat("x", hooks.DefaultMaxInput))), auth, "larger than"},
		{"bad_token", hooks.ClaudeCode, "", bytes.NewReader(pre), []string{"Authorization", "Bearer nope"}, "bearer token"},
		{"no_token_permission", hooks.ClaudeCode, "", bytes.NewReader(perm), nil, "bearer token"},
		{"gemini_bad_token", hooks.Gemini, "", bytes.NewReader(recorded(t, hooks.Gemini, "before_shell.json", "")), nil, "bearer token"},
		{"codex_bad_token", hooks.Codex, "", bytes.NewReader(recorded(t, hooks.Codex, "pre_bash.json", "")), nil, "bearer token"},
		{"unknown_vault", hooks.ClaudeCode, "?vault=nope", bytes.NewReader(pre), auth, "nope"},
		{"unknown_parameter", hooks.ClaudeCode, "?vualt=x", bytes.NewReader(pre), auth, "unknown query parameter"},
		{"headless_codex", hooks.Codex, "?headless=1", bytes.NewReader(recorded(t, hooks.Codex, "pre_bash.json", "")), auth, "claude-code only"},
		{"deadline", hooks.Gemini, "?timeout=1ns", bytes.NewReader(recorded(t, hooks.Gemini, "before_shell.json", "")), auth, "no decision within 1ns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := ts.post("/v1/hooks/"+string(tc.h)+tc.query, tc.body, tc.header...)
			if status != http.StatusOK || !strings.Contains(string(body), tc.want) || !strings.Contains(string(body), "blocked") {
				t.Fatalf("HTTP %d: %s", status, body)
			}
			if tc.name == "deadline" {
				return // whether Run read the payload first is a race
			}
			hookGolden(t, "blocked_"+tc.name, body)
		})
	}
	// The other endpoints still answer 401 without the token.
	if status, _, _ := ts.post("/v1/precheck", strings.NewReader(`{"shell":"ls"}`)); status != http.StatusUnauthorized {
		t.Errorf("/v1/precheck without a token: HTTP %d", status)
	}
}

// TestHookEndpointBrokenPolicy: a policy that fails while deciding
// denies the call (the engine's fail_closed rule), with status 200.
func TestHookEndpointBrokenPolicy(t *testing.T) {
	ts := &testServer{t: t, home: t.TempDir(), bundle: t.TempDir(), done: make(chan error, 1)}
	// Compiles, and fails at evaluation: a complete rule with two values.
	writeBundle(t, ts.bundle, "broken-1", `package extensions.servetest

conflict := v if {
	some v in [1, 2]
}

reasons contains {"id": "servetest.broken", "decision": "deny", "message": "never"} if {
	conflict == 3
}
`)
	srv, err := New(context.Background(), Config{Load: loader(ts.home, ts.bundle), Poll: -1, Hooks: HookConfig{Exe: testExe}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/hooks/claude-code", bytes.NewReader(recorded(t, hooks.ClaudeCode, "pre_bash.json", "ls")))
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"permissionDecision":"deny"`) || !strings.Contains(rec.Body.String(), "avfs.engine.fail_closed") {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body.String())
	}
}

// TestHookServerAddress: the rewrites name the address the server listens
// on, the loopback for a wildcard host, so that the harness's shell
// reaches it.
func TestHookServerAddress(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "avfs.sock")
	for _, tc := range []struct {
		listen string
		want   *regexp.Regexp
	}{
		{"unix:" + sock, regexp.MustCompile(` --server ` + regexp.QuoteMeta(sock) + ` `)},
		{"tcp:127.0.0.1:0", regexp.MustCompile(` --server tcp:127\.0\.0\.1:[0-9]+ `)},
		{"tcp:0.0.0.0:0", regexp.MustCompile(` --server tcp:127\.0\.0\.1:[0-9]+ `)},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			ts := startHookServer(t, nil, tc.listen, "")
			_, _, body := ts.post("/v1/hooks/codex", bytes.NewReader(recorded(t, hooks.Codex, "pre_bash.json", "ls")))
			var out hooks.CodexOutput
			if err := json.Unmarshal(body, &out); err != nil || out.HookSpecificOutput.UpdatedInput == nil ||
				!tc.want.MatchString(out.HookSpecificOutput.UpdatedInput.Command) {
				t.Fatalf("%s", body)
			}
			if _, port, err := net.SplitHostPort(strings.TrimPrefix(ts.base, "http://")); strings.HasPrefix(tc.listen, "tcp:") &&
				(err != nil || !strings.Contains(out.HookSpecificOutput.UpdatedInput.Command, ":"+port+" ")) {
				t.Errorf("not the port listened on (%s): %s", port, body)
			}
		})
	}
}
