package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"avfs/bundles"
	"avfs/engine"
	"avfs/runner"
	"avfs/vault"
	"avfs/wire"
)

// approvalRego sends touch for approval and denies rm -r (an extension
// bundle, see docs/policy.md); revision is the manifest's.
func writeBundle(t *testing.T, dir, revision, rego string) {
	t.Helper()
	if rego == "" {
		rego = `package extensions.servetest

# METADATA
# title: Touching files needs approval
# custom:
#   id: servetest.approval.touch
#   decision: require_approval
reasons contains reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in data.avfs.lib.commands
	cmd.program == "touch"
}

reason(meta, subject) := {
	"id": meta.custom.id,
	"decision": meta.custom.decision,
	"message": sprintf("%s: %s", [meta.title, subject]),
}
`
	}
	for name, content := range map[string]string{
		".manifest":      `{"revision": "` + revision + `", "roots": ["extensions/servetest"]}`,
		"servetest.rego": rego,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testServer is a server on a socket in a temporary directory.
type testServer struct {
	t      *testing.T
	home   string
	bundle string
	srv    *Server
	client *http.Client
	base   string
	cancel context.CancelFunc
	done   chan error
}

func loader(home, bundle string) Loader {
	return func(ctx context.Context) (*runner.Runner, []string, error) {
		watch := []string{bundle}
		set, err := bundles.Load(ctx, bundles.Options{IncludeDefault: true, Paths: []string{bundle}})
		if err != nil {
			return nil, watch, err
		}
		p, err := engine.NewPolicy(ctx, set, engine.PolicyOptions{})
		if err != nil {
			return nil, watch, err
		}
		return &runner.Runner{Store: vault.NewStore(home, vault.Options{Actor: "test"}), Policy: p, HostEnv: os.Environ(),
			RunDir: filepath.Join(home, "run")}, watch, nil
	}
}

func startServer(t *testing.T, token []byte, addr string) *testServer {
	t.Helper()
	ts := &testServer{t: t, home: t.TempDir(), bundle: t.TempDir(), done: make(chan error, 1)}
	writeBundle(t, ts.bundle, "servetest-1", "")
	srv, err := New(context.Background(), Config{Load: loader(ts.home, ts.bundle), Poll: -1, Token: token, Version: "test"})
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

func (ts *testServer) stop() {
	if ts.cancel == nil {
		return
	}
	ts.cancel()
	ts.cancel = nil
	if err := <-ts.done; err != nil {
		ts.t.Errorf("serve: %v", err)
	}
}

// call sends body (nil: GET) to path and returns the status and the answer.
func (ts *testServer) call(path string, body any, header ...string) (int, http.Header, []byte) {
	ts.t.Helper()
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			ts.t.Fatal(err)
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, ts.base+path, rd)
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
	return resp.StatusCode, resp.Header, b
}

func (ts *testServer) create(names ...string) {
	ts.t.Helper()
	for _, name := range names {
		v, err := vault.NewStore(ts.home, vault.Options{}).Create(context.Background(), name)
		if err != nil {
			ts.t.Fatal(err)
		}
		v.Close()
	}
}

func (ts *testServer) exec(in wire.ExecRequest) (*wire.Envelope, int, []byte) {
	ts.t.Helper()
	code, h, b := ts.call("/v1/exec", in)
	if code != http.StatusOK {
		ts.t.Fatalf("exec %+v: HTTP %d: %s", in, code, b)
	}
	var env wire.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		ts.t.Fatal(err)
	}
	status, err := strconv.Atoi(h.Get(ExitStatusHeader))
	if err != nil {
		ts.t.Fatalf("exit status header %q", h.Get(ExitStatusHeader))
	}
	return &env, status, b
}

func into[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestExec(t *testing.T) {
	ts := startServer(t, nil, "")
	ts.create("second")
	for _, tc := range []struct {
		name     string
		in       wire.ExecRequest
		decision wire.Decision
		status   int
		stdout   string
	}{
		{"allow", wire.ExecRequest{Argv: []string{"echo", "hello"}}, wire.Allow, 0, "hello\n"},
		{"shell with checkpoint", wire.ExecRequest{Shell: "echo hi > a.txt"}, wire.AllowWithCheckpoint, 0, ""},
		{"exit status", wire.ExecRequest{Argv: []string{"false"}}, wire.Allow, 1, ""},
		{"deny", wire.ExecRequest{Argv: []string{"cat", "/etc/shadow"}, Sandbox: "none"}, wire.Deny, wire.ExitNotRun, ""},
		{"other vault", wire.ExecRequest{Argv: []string{"ls"}, Vault: "second"}, wire.Allow, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, status, b := ts.exec(tc.in)
			if env.Decision != tc.decision || status != tc.status {
				t.Fatalf("decision %s status %d, want %s %d: %s", env.Decision, status, tc.decision, tc.status, b)
			}
			if tc.stdout != "" && (env.Process == nil || env.Process.Stdout != tc.stdout) {
				t.Fatalf("stdout: %s", b)
			}
		})
	}
	// The envelope is encoded as avfs --json prints it.
	env, _, b := ts.exec(wire.ExecRequest{Argv: []string{"echo", "<&>"}})
	var want bytes.Buffer
	if err := Encode(&want, env); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want.Bytes()) || !bytes.Contains(b, []byte(`"<&>\n"`)) {
		t.Fatalf("encoding:\n%s\nwant\n%s", b, want.Bytes())
	}
}

func TestExecApproval(t *testing.T) {
	ts := startServer(t, nil, "")
	env, status, b := ts.exec(wire.ExecRequest{Argv: []string{"touch", "x"}})
	if env.Decision != wire.RequireApproval || status != wire.ExitNotRun || env.Approval == nil || env.Approval.Status != "pending" {
		t.Fatalf("request: %s", b)
	}
	v, err := vault.NewStore(ts.home, vault.Options{}).Open(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.DecideApproval(context.Background(), env.Approval.ID, true, "fine", "test", ""); err != nil {
		t.Fatal(err)
	}
	v.Close()
	env, status, b = ts.exec(wire.ExecRequest{Argv: []string{"touch", "x"}, ApprovalID: env.Approval.ID})
	if status != 0 || env.Approval == nil || env.Approval.Status != "used" || env.ChangesTotal != 1 {
		t.Fatalf("approved run: %s", b)
	}
}

func TestErrors(t *testing.T) {
	ts := startServer(t, nil, "")
	for _, tc := range []struct {
		name, path string
		body       any
		status     int
		code       wire.Code
	}{
		{"no command", "/v1/exec", wire.ExecRequest{}, 400, wire.CodeUsage},
		{"argv and shell", "/v1/exec", wire.ExecRequest{Argv: []string{"ls"}, Shell: "ls"}, 400, wire.CodeUsage},
		{"negative timeout", "/v1/exec", map[string]any{"argv": []string{"ls"}, "timeout_ms": -1}, 400, wire.CodeUsage},
		{"unknown field", "/v1/exec", map[string]any{"argv": []string{"ls"}, "timeout": "1s"}, 400, wire.CodeUsage},
		{"precheck nothing", "/v1/precheck", wire.ExecRequest{}, 400, wire.CodeUsage},
		{"decide nothing", "/v1/decide", wire.DecideRequest{}, 400, wire.CodeUsage},
		{"decide bad sandbox", "/v1/decide", wire.DecideRequest{Argv: []string{"ls"}, Sandbox: "chroot"}, 400, wire.CodeUsage},
		{"no endpoint", "/v2/exec", nil, 404, wire.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := ts.call(tc.path, tc.body)
			doc := into[struct {
				Error struct {
					Code    wire.Code `json:"code"`
					Message string    `json:"message"`
				} `json:"error"`
			}](t, b)
			if status != tc.status || doc.Error.Code != tc.code || doc.Error.Message == "" {
				t.Fatalf("HTTP %d %s, want %d %s", status, b, tc.status, tc.code)
			}
		})
	}
}

// TestPrecheck: /v1/precheck decides a run without running it; for
// require_approval it creates one pending approval, finds that same one
// again, and answers the granted one once it is granted.
func TestPrecheck(t *testing.T) {
	ts := startServer(t, nil, "")
	precheck := func(in wire.ExecRequest) wire.PrecheckResult {
		t.Helper()
		status, _, b := ts.call("/v1/precheck", in)
		if status != http.StatusOK {
			t.Fatalf("precheck %+v: HTTP %d %s", in, status, b)
		}
		res := into[wire.PrecheckResult](t, b)
		if res.Kind != wire.PrecheckKind || res.Vault != "default" || len(res.Bundles) != 2 || res.Reasons == nil {
			t.Fatalf("precheck %+v: %s", in, b)
		}
		return res
	}
	for _, tc := range []struct {
		name string
		in   wire.ExecRequest
		want wire.Decision
	}{
		{"allow", wire.ExecRequest{Argv: []string{"ls"}}, wire.Allow},
		{"checkpoint", wire.ExecRequest{Shell: "echo hi > a.txt"}, wire.AllowWithCheckpoint},
		{"deny", wire.ExecRequest{Argv: []string{"cat", "/etc/shadow"}, Sandbox: "none"}, wire.Deny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := precheck(tc.in); res.Decision != tc.want || res.Approval != nil {
				t.Fatalf("%+v, want %s", res, tc.want)
			}
		})
	}
	// Nothing ran: the shell command wrote no file.
	if env, _, b := ts.exec(wire.ExecRequest{Argv: []string{"ls", "a.txt"}}); env.Process == nil || env.Process.ExitCode == 0 {
		t.Fatalf("precheck ran the command: %s", b)
	}

	in := wire.ExecRequest{Argv: []string{"touch", "x"}}
	first := precheck(in)
	if first.Decision != wire.RequireApproval || first.Approval == nil || first.Approval.Status != "pending" {
		t.Fatalf("require_approval: %+v", first)
	}
	if again := precheck(in); again.Approval == nil || again.Approval.ID != first.Approval.ID || again.Approval.Status != "pending" {
		t.Fatalf("again: %+v, want the pending %s", again.Approval, first.Approval.ID)
	}
	v, err := vault.NewStore(ts.home, vault.Options{}).Open(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	all, err := v.Approvals(context.Background(), "")
	if err != nil || len(all) != 1 {
		t.Fatalf("approvals: %v %+v, want one", err, all)
	}
	if _, err := v.DecideApproval(context.Background(), first.Approval.ID, true, "fine", "test", ""); err != nil {
		t.Fatal(err)
	}
	if granted := precheck(in); granted.Approval == nil || granted.Approval.ID != first.Approval.ID || granted.Approval.Status != "granted" {
		t.Fatalf("granted: %+v", granted.Approval)
	}
	// The id the precheck gave is the one the run accepts.
	if env, status, b := ts.exec(wire.ExecRequest{Argv: []string{"touch", "x"}, ApprovalID: first.Approval.ID}); status != 0 || env.Approval == nil || env.Approval.Status != "used" {
		t.Fatalf("approved run: %s", b)
	}
}

func TestDecide(t *testing.T) {
	ts := startServer(t, nil, "")
	for _, tc := range []struct {
		in   wire.DecideRequest
		want wire.Decision
	}{
		{wire.DecideRequest{Argv: []string{"ls"}}, wire.Allow},
		{wire.DecideRequest{Shell: "echo a > b"}, wire.AllowWithCheckpoint},
		{wire.DecideRequest{Argv: []string{"touch", "a"}}, wire.RequireApproval},
		{wire.DecideRequest{Argv: []string{"cat", "/etc/shadow"}, Sandbox: wire.SandboxNone}, wire.Deny},
	} {
		status, _, b := ts.call("/v1/decide", tc.in)
		res := into[wire.DecideResult](t, b)
		if status != 200 || res.Decision != tc.want || len(res.Bundles) != 2 || res.Input != nil {
			t.Fatalf("decide %+v: HTTP %d %s, want %s", tc.in, status, b, tc.want)
		}
	}
	_, _, b := ts.call("/v1/decide", wire.DecideRequest{Argv: []string{"ls"}, Input: true})
	if res := into[wire.DecideResult](t, b); res.Input == nil || len(res.Input.Commands) != 1 {
		t.Fatalf("input: %s", b)
	}
}

func TestHealthAndStatus(t *testing.T) {
	ts := startServer(t, nil, "")
	for _, path := range []string{"/health", "/health?bundles"} {
		status, _, b := ts.call(path, nil)
		if h := into[wire.ServeHealth](t, b); status != 200 || h.Status != "ok" {
			t.Fatalf("%s: HTTP %d %s", path, status, b)
		}
	}
	ts.exec(wire.ExecRequest{Argv: []string{"true"}})
	status, _, b := ts.call("/v1/status", nil)
	st := into[wire.ServeStatus](t, b)
	if status != 200 || st.Kind != wire.ServeStatusKind || st.Version != "test" || st.PID != os.Getpid() || !strings.HasPrefix(st.Listen, "unix:") ||
		st.RunsTotal != 1 || st.RunsInFlight != 0 || st.LastReloadError != nil || revisionsOf(st.Bundles) != "avfs-default-1,servetest-1" {
		t.Fatalf("status: %s", b)
	}
}

func revisionsOf(bs []wire.BundleInfo) string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Revision)
	}
	return strings.Join(out, ",")
}

func TestReload(t *testing.T) {
	ts := startServer(t, nil, "")
	ctx := context.Background()
	if ts.srv.ReloadIfChanged(ctx) {
		t.Fatal("reloaded without a change")
	}
	// A broken bundle keeps the policy in use and says why.
	writeBundle(t, ts.bundle, "servetest-2", "package extensions.servetest\n\nreasons contains x if {\n")
	if !ts.srv.ReloadIfChanged(ctx) {
		t.Fatal("no reload after a change")
	}
	_, _, b := ts.call("/v1/status", nil)
	st := into[wire.ServeStatus](t, b)
	if st.LastReloadError == nil || st.LastReloadError.Code != wire.CodeBundleInvalid || st.LastReloadAt == nil || st.Reloads != 0 ||
		revisionsOf(st.Bundles) != "avfs-default-1,servetest-1" {
		t.Fatalf("status after a broken reload: %s", b)
	}
	if status, _, b := ts.call("/health?bundles", nil); status != 503 || into[wire.ServeHealth](t, b).Status != "stale" {
		t.Fatalf("health?bundles after a broken reload: %d %s", status, b)
	}
	if status, _, _ := ts.call("/health", nil); status != 200 {
		t.Fatalf("health after a broken reload: %d", status)
	}
	if _, _, b := ts.call("/v1/decide", wire.DecideRequest{Argv: []string{"touch", "a"}}); into[wire.DecideResult](t, b).Decision != wire.RequireApproval {
		t.Fatalf("the last good policy is not in use: %s", b)
	}
	// A good one replaces it: touch is no longer sent for approval.
	writeBundle(t, ts.bundle, "servetest-3", "package extensions.servetest\n\nreasons := set()\n")
	if !ts.srv.ReloadIfChanged(ctx) {
		t.Fatal("no reload after a change")
	}
	_, _, b = ts.call("/v1/status", nil)
	if st := into[wire.ServeStatus](t, b); st.LastReloadError != nil || st.Reloads != 1 || revisionsOf(st.Bundles) != "avfs-default-1,servetest-3" {
		t.Fatalf("status after a reload: %s", b)
	}
	if _, _, b := ts.call("/v1/decide", wire.DecideRequest{Argv: []string{"touch", "a"}}); into[wire.DecideResult](t, b).Decision != wire.AllowWithCheckpoint {
		t.Fatalf("the new policy is not in use: %s", b)
	}
}

// TestReloadPolls: the server notices a changed bundle by itself.
func TestReloadPolls(t *testing.T) {
	ts := startServer(t, nil, "")
	stop := make(chan struct{}) // the server's own loop never looks (Poll -1): this one does
	defer close(stop)
	go ts.srv.reloadLoop(context.Background(), stop, 20*time.Millisecond)
	writeBundle(t, ts.bundle, "servetest-9", "package extensions.servetest\n\nreasons := set()\n")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if revisionsOf(ts.srv.Status().Bundles) == "avfs-default-1,servetest-9" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reloaded: %+v", ts.srv.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConcurrentVaults: runs on two vaults overlap; runs on one take turns.
func TestConcurrentVaults(t *testing.T) {
	ts := startServer(t, nil, "")
	ts.create("a", "b", "c", "d")
	// Each run records when it started and ended (in the vault it runs in).
	script := `date +%s%N > start; sleep 0.5; date +%s%N > end`
	run := func(vaultName string) (*wire.Envelope, int) {
		env, status, _ := ts.exec(wire.ExecRequest{Shell: script, Vault: vaultName})
		return env, status
	}
	times := func(vaultName string) []int64 {
		v, err := vault.NewStore(ts.home, vault.Options{}).Open(context.Background(), vaultName)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		var out []int64
		for _, f := range []string{"/start", "/end"} {
			var b bytes.Buffer
			if _, err := v.ReadFile(context.Background(), f, &b); err != nil {
				t.Fatal(err)
			}
			n, err := strconv.ParseInt(strings.TrimSpace(b.String()), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var envs []*wire.Envelope
	for _, name := range []string{"a", "b"} {
		wg.Go(func() {
			env, status := run(name)
			mu.Lock()
			defer mu.Unlock()
			envs = append(envs, env)
			if status != 0 {
				t.Errorf("vault %s: status %d: %+v", name, status, env.Error)
			}
		})
	}
	wg.Wait()
	a, b := times("a"), times("b")
	for _, e := range envs {
		t.Logf("%s: %+v", e.Vault, e.Timing)
	}
	if !(a[0] < b[1] && b[0] < a[1]) {
		t.Fatalf("runs on two vaults did not overlap: a %v b %v", a, b)
	}
	// Two runs on one vault: the second waits for the first, nobody fails busy.
	var spans [][2]int64
	for range 2 {
		wg.Go(func() {
			env, status, b := ts.exec(wire.ExecRequest{Shell: `date +%s%N; sleep 0.3; date +%s%N`, Vault: "c"})
			if status != 0 || env.Process == nil {
				t.Errorf("vault c: status %d: %s", status, b)
				return
			}
			f := strings.Fields(env.Process.Stdout)
			s, _ := strconv.ParseInt(f[0], 10, 64)
			e, _ := strconv.ParseInt(f[1], 10, 64)
			mu.Lock()
			spans = append(spans, [2]int64{s, e})
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(spans) != 2 || (spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1]) {
		t.Fatalf("runs on one vault overlapped: %v", spans)
	}
	// With no wait, the second fails busy at once, as proxy exec --wait 0 does.
	zero := int64(0)
	first := make(chan struct{})
	wg.Go(func() {
		close(first)
		ts.exec(wire.ExecRequest{Shell: "sleep 1", Vault: "d"})
	})
	<-first
	for deadline := time.Now().Add(10 * time.Second); ts.srv.Status().RunsInFlight == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first run did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var busy *wire.Envelope
	for deadline := time.Now().Add(10 * time.Second); ; {
		env, status, _ := ts.exec(wire.ExecRequest{Argv: []string{"true"}, Vault: "d", WaitMS: &zero})
		if status == wire.ExitAvfsFailed && env.Error != nil && env.Error.Code == wire.CodeVaultBusy {
			busy = env
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never busy: %d %+v", status, env.Error)
		}
	}
	wg.Wait()
	if !strings.Contains(busy.Error.Message, "waited 0s for the vault") {
		t.Fatalf("busy: %+v", busy.Error)
	}
}

func TestTCPToken(t *testing.T) {
	ts := startServer(t, []byte("s3cret"), "tcp:127.0.0.1:0")
	for _, tc := range []struct {
		header []string
		want   int
	}{
		{nil, 401},
		{[]string{"Authorization", "Bearer wrong"}, 401},
		{[]string{"Authorization", "s3cret"}, 401},
		{[]string{"Authorization", "Bearer s3cret"}, 200},
	} {
		if status, _, b := ts.call("/health", nil, tc.header...); status != tc.want {
			t.Fatalf("%v: HTTP %d %s, want %d", tc.header, status, b, tc.want)
		}
	}
}

func TestListen(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "avfs.sock")
	ln, err := Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	// A live daemon's socket is refused.
	if _, err := Listen(sock); !wire.HasCode(err, wire.CodeInvalidInput) || !strings.Contains(err.Error(), "another avfs serve") {
		t.Fatalf("second listen: %v", err)
	}
	// A socket left behind (its daemon killed: the lock is free) is replaced.
	ln.lock.Close()
	ln.lock = nil
	ul := ln.Listener.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	ul.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatal(err)
	}
	ln2, err := Listen(sock)
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	ln2.Close()
	// A directory others may write is refused; so is a file in the way.
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(open, "s")); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("listen in a shared directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(dir, "file")); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("listen over a file: %v", err)
	}
}

// TestShutdownInterrupts: a shutdown lets a run finish for the grace
// period, then interrupts it; the run's envelope says so.
func TestShutdownInterrupts(t *testing.T) {
	ts := startServer(t, nil, "")
	ts.srv.cfg.Grace = 200 * time.Millisecond
	got := make(chan *wire.Envelope, 1)
	go func() {
		env, _, _ := ts.exec(wire.ExecRequest{Argv: []string{"sleep", "30"}})
		got <- env
	}()
	for deadline := time.Now().Add(10 * time.Second); ts.srv.Status().RunsInFlight == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the run did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	ts.stop()
	env := <-got
	if env.Process == nil || env.Process.Interrupted != "SIGTERM" || time.Since(start) > 15*time.Second {
		t.Fatalf("interrupted run: %+v %+v", env.Process, env.Error)
	}
	ents, _ := os.ReadDir(filepath.Join(ts.home, "run"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "exec-") {
			t.Fatalf("left in the run directory: %s", e.Name())
		}
	}
}

// TestExecVaultKeptOpen: runs through the daemon share one open vault per
// file; a vault deleted (or replaced) between runs is never the one the
// next run sees, and shutting down closes what was kept.
func TestExecVaultKeptOpen(t *testing.T) {
	ts := startServer(t, nil, "")
	ts.create("kept")
	for range 2 {
		env, status, b := ts.exec(wire.ExecRequest{Shell: "echo one >> a.txt; cat a.txt", Vault: "kept"})
		if status != 0 || env.Error != nil {
			t.Fatalf("run: %s", b)
		}
	}
	if n := ts.srv.vaults.Len(); n != 1 {
		t.Fatalf("%d vaults kept open, want 1", n)
	}
	store := vault.NewStore(ts.home, vault.Options{})
	if err := store.Delete(context.Background(), "kept", false); err != nil {
		t.Fatal(err)
	}
	ts.create("kept")
	env, status, b := ts.exec(wire.ExecRequest{Shell: "cat a.txt 2>/dev/null || echo none", Vault: "kept"})
	if status != 0 || env.Process == nil || env.Process.Stdout != "none\n" {
		t.Fatalf("the run after the vault was made again saw: %s", b)
	}
	ts.stop()
	if n := ts.srv.vaults.Len(); n != 0 {
		t.Fatalf("%d vaults open after shutdown", n)
	}
}

// TestExecPreparedSandbox: after a sandboxed run, the daemon prepares the
// next run's sandbox while idle; that run takes it, sees the vault at
// /workspace and its changes are the vault's. Shutdown ends what waits.
func TestExecPreparedSandbox(t *testing.T) {
	ts := startServer(t, nil, "")
	status := func() wire.ServeSandboxes {
		t.Helper()
		_, _, b := ts.call("/v1/status", nil)
		st := into[wire.ServeStatus](t, b)
		if st.Sandboxes == nil {
			t.Fatalf("no sandboxes in the status: %s", b)
		}
		return *st.Sandboxes
	}
	if st := status(); st.Off != "" {
		t.Fatalf("the daemon prepares no sandbox here: %s", st.Off)
	}
	env, code, b := ts.exec(wire.ExecRequest{Shell: "echo one > f1"})
	if code != 0 || env.Sandbox == nil || env.Sandbox.Mode != wire.SandboxNamespaces {
		t.Fatalf("first run: %s", b)
	}
	for deadline := time.Now().Add(20 * time.Second); status().Waiting == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing was prepared: %+v", status())
		}
	}
	env, code, b = ts.exec(wire.ExecRequest{Shell: "echo two > f2; cat f1; pwd"})
	if code != 0 || env.Process == nil || env.Process.Stdout != "one\n/workspace\n" || len(env.Changes) != 1 || env.Changes[0].Path != "/f2" {
		t.Fatalf("second run: %s", b)
	}
	if st := status(); st.Taken != 1 || st.Built != 1 {
		t.Fatalf("sandboxes %+v", st)
	}
	ts.stop()
	if ents, err := os.ReadDir(filepath.Join(ts.home, "run", "sandboxes")); err != nil || len(ents) != 0 {
		t.Fatalf("after shutdown, the prepared roots: %v %v", ents, err)
	}
}

// fakeManaged is a Managed whose answers the test sets.
type fakeManaged struct {
	mu           sync.Mutex
	policy       *engine.Policy
	notActivated []string
	pluginsNotOK map[string]string
}

func (f *fakeManaged) Policy() *engine.Policy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policy
}

func (f *fakeManaged) NotActivated() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notActivated
}

func (f *fakeManaged) PluginsNotOK() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pluginsNotOK
}

// TestManaged: with Config.Managed, the server decides with its policy
// (not the loader's), swaps it on PolicyChanged and after a reload, and
// /health?bundles and ?plugins answer 500 saying which until ready.
func TestManaged(t *testing.T) {
	home, bundle := t.TempDir(), t.TempDir()
	writeBundle(t, bundle, "servetest-1", "")
	f := &fakeManaged{policy: engine.NewUnavailablePolicy("bundle team was never activated", nil),
		notActivated: []string{"team"}, pluginsNotOK: map[string]string{"bundle": "NOT_READY"}}
	srv, err := New(context.Background(), Config{Load: loader(home, bundle), Poll: -1, Managed: f})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	call := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes()
	}
	decide := func() wire.DecideResult {
		_, b := call("POST", "/v1/decide", `{"argv": ["touch", "a"]}`)
		return into[wire.DecideResult](t, b)
	}
	tests := []struct {
		path        string
		code        int
		bundles     []string
		plugins     bool
		wantInError string
	}{
		{"/health", 200, nil, false, ""},
		{"/health?bundles", 500, []string{"team"}, false, "bundles are not activated: team"},
		{"/health?plugins", 500, nil, true, "plugins are not up: bundle"},
		{"/health?bundles&plugins", 500, []string{"team"}, true, "team"},
	}
	for _, tt := range tests {
		code, b := call("GET", tt.path, "")
		got := into[wire.ServeHealth](t, b)
		if code != tt.code || strings.Join(got.BundlesNotActivated, ",") != strings.Join(tt.bundles, ",") ||
			(got.PluginsNotOK["bundle"] != "") != tt.plugins || !strings.Contains(got.Error, tt.wantInError) {
			t.Errorf("%s: %d %s", tt.path, code, b)
		}
	}
	if res := decide(); res.Decision != wire.Deny || res.Reasons[0].ID != engine.ReasonPolicyUnavailable {
		t.Fatalf("decision under the unavailable policy: %+v", res)
	}
	// The bundles activate: the server swaps to the managed policy.
	r, _, err := loader(home, bundle)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.policy, f.notActivated, f.pluginsNotOK = r.Policy, nil, nil
	f.mu.Unlock()
	srv.PolicyChanged()
	if code, b := call("GET", "/health?bundles&plugins", ""); code != 200 {
		t.Fatalf("health when ready: %d %s", code, b)
	}
	if res := decide(); res.Decision != wire.RequireApproval {
		t.Fatalf("decision after PolicyChanged: %+v", res)
	}
	// A reload keeps the managed policy, not the loader's.
	f.mu.Lock()
	f.policy = engine.NewUnavailablePolicy("again", nil)
	f.mu.Unlock()
	writeBundle(t, bundle, "servetest-2", "")
	if !srv.ReloadIfChanged(context.Background()) {
		t.Fatal("no reload")
	}
	if res := decide(); res.Decision != wire.Deny || res.Reasons[0].ID != engine.ReasonPolicyUnavailable {
		t.Fatalf("decision after a reload: %+v", res)
	}
}
