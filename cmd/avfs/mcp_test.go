package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"avfs/wire"
)

var updateMCP = flag.Bool("update-mcp", false, "rewrite the golden files of avfs mcp")

// mcpCmd is `avfs mcp args…` with a's environment.
func (a *avfs) mcpCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(avfsBin, append([]string{"mcp"}, args...)...)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AVFS_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, "AVFS_HOME="+a.home), a.env...)
	return cmd
}

// mcpSession connects the SDK's client to `avfs mcp args…` over stdio.
func (a *avfs) mcpSession(opts *mcp.ClientOptions, args ...string) *mcp.ClientSession {
	a.t.Helper()
	cmd := a.mcpCmd(args...)
	cmd.Stderr = &lockedBuffer{}
	c := mcp.NewClient(&mcp.Implementation{Name: "avfs-test", Version: "1"}, opts)
	s, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		a.t.Fatalf("connect to avfs mcp: %v", err)
	}
	a.t.Cleanup(func() { s.Close() })
	return s
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// call calls tool with args and fails the test on a protocol error.
func call(t *testing.T, s *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// structured decodes a result's structured content into v.
func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// execEnvelope calls exec and returns its envelope.
func execEnvelope(t *testing.T, s *mcp.ClientSession, args map[string]any, wantError bool) (*mcp.CallToolResult, wire.Envelope) {
	t.Helper()
	res := call(t, s, "exec", args)
	var env wire.Envelope
	structured(t, res, &env)
	if res.IsError != wantError {
		t.Fatalf("exec %v: isError %v, want %v: %s", args, res.IsError, wantError, text(res))
	}
	if env.Kind != wire.EnvelopeKind || env.SchemaVersion != wire.EnvelopeSchemaVersion || env.ID == "" {
		t.Fatalf("exec %v: not an envelope: %+v", args, env)
	}
	return res, env
}

func TestMCPToolsList(t *testing.T) {
	t.Parallel()
	s := newAVFS(t).mcpSession(nil)
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	schemas := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		schemas[tool.Name] = tool
	}
	slices.Sort(names)
	equal(t, "tools", strings.Join(names, ","), "approval_status,changes,checkpoint_list,checkpoint_restore,exec")
	for _, c := range []struct {
		tool string
		in   []string
		out  []string
	}{
		{"exec", []string{"argv", "shell", "cwd", "timeout_seconds", "vault", "readonly", "approval"}, []string{"decision", "process", "changes", "checkpoint", "approval", "error"}},
		{"checkpoint_list", []string{"vault"}, []string{"vault", "checkpoints"}},
		{"checkpoint_restore", []string{"vault", "checkpoint"}, []string{"checkpoint", "changes"}},
		{"changes", []string{"vault", "since", "to"}, []string{"from", "to", "changes"}},
		{"approval_status", []string{"vault", "id"}, []string{"id", "status", "request"}},
	} {
		for _, sc := range []struct {
			what   string
			schema any
			want   []string
		}{{"input", schemas[c.tool].InputSchema, c.in}, {"output", schemas[c.tool].OutputSchema, c.out}} {
			m, _ := sc.schema.(map[string]any)
			props, _ := m["properties"].(map[string]any)
			for _, p := range sc.want {
				if props[p] == nil {
					t.Errorf("%s: %s schema has no property %q: %v", c.tool, sc.what, p, sc.schema)
				}
			}
		}
	}
}

func TestMCPExec(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	s := a.mcpSession(nil)

	// allow_with_checkpoint: it runs and reports as proxy exec does.
	res, env := execEnvelope(t, s, map[string]any{"shell": "echo hi > a.txt; cat a.txt"}, false)
	equal(t, "decision", env.Decision, wire.AllowWithCheckpoint)
	if env.Process == nil || env.Process.ExitCode != 0 || env.Process.Stdout != "hi\n" || env.Checkpoint == nil || env.ChangesTotal != 1 || env.Changes[0].Path != "/a.txt" {
		t.Fatalf("allowed run: %+v", env)
	}
	if !strings.Contains(text(res), "exit 0") || !strings.Contains(text(res), "hi") {
		t.Fatalf("text fallback: %q", text(res))
	}
	cp := env.Checkpoint.ID

	// A command that fails is an error result, with its envelope.
	_, env = execEnvelope(t, s, map[string]any{"argv": []string{"sh", "-c", "exit 3"}, "readonly": true}, true)
	if env.Process == nil || env.Process.ExitCode != 3 {
		t.Fatalf("failing run: %+v", env)
	}

	// deny: not run.
	res, env = execEnvelope(t, s, map[string]any{"argv": []string{"cat", "/var/log/syslog"}}, true)
	if env.Decision != wire.Deny || env.Process != nil || len(env.Policy.Reasons) == 0 || !strings.Contains(text(res), "not run") {
		t.Fatalf("denied run: %+v %q", env, text(res))
	}

	// Bad input is a tool error, not an envelope.
	if res := call(t, s, "exec", map[string]any{"argv": []string{"true"}, "shell": "true"}); !res.IsError || !strings.Contains(text(res), "not both") {
		t.Fatalf("argv and shell: %+v", res)
	}

	// checkpoint_list, changes, checkpoint_restore.
	var list struct {
		Vault       string `json:"vault"`
		Checkpoints []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"checkpoints"`
	}
	structured(t, call(t, s, "checkpoint_list", map[string]any{}), &list)
	if list.Vault != "default" || len(list.Checkpoints) != 1 || list.Checkpoints[0].ID != cp {
		t.Fatalf("checkpoint_list: %+v", list)
	}
	var ch struct {
		From    string   `json:"from"`
		Changes []pathOp `json:"changes"`
	}
	structured(t, call(t, s, "changes", map[string]any{"since": list.Checkpoints[0].Name}), &ch)
	if len(ch.Changes) != 1 || ch.Changes[0].Path != "/a.txt" || ch.Changes[0].Op != "added" {
		t.Fatalf("changes: %+v", ch)
	}
	var restored struct {
		Checkpoint struct {
			ID int64 `json:"id"`
		} `json:"checkpoint"`
		Changes []pathOp `json:"changes"`
	}
	structured(t, call(t, s, "checkpoint_restore", map[string]any{"checkpoint": "1"}), &restored)
	if restored.Checkpoint.ID != cp || len(restored.Changes) != 1 || restored.Changes[0].Op != "deleted" {
		t.Fatalf("checkpoint_restore: %+v", restored)
	}
	structured(t, call(t, s, "changes", map[string]any{"since": "1"}), &ch)
	if len(ch.Changes) != 0 {
		t.Fatalf("changes after restore: %+v", ch)
	}
	if res := call(t, s, "checkpoint_restore", map[string]any{"checkpoint": "no-such"}); !res.IsError || !strings.Contains(text(res), "checkpoint_not_found") {
		t.Fatalf("restore of a missing checkpoint: %+v %q", res, text(res))
	}
}

// pathOp is a vault change as the checkpoint tools list it.
type pathOp struct {
	Path string `json:"path"`
	Op   string `json:"op"`
}

func TestMCPApproval(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	bundle := approvalBundle(t)

	t.Run("without elicitation", func(t *testing.T) {
		s := a.mcpSession(nil, "--bundle", bundle)
		res, env := execEnvelope(t, s, map[string]any{"argv": []string{"touch", "plain.txt"}}, true)
		if env.Decision != wire.RequireApproval || env.Process != nil || env.Approval == nil || env.Approval.Status != "pending" {
			t.Fatalf("approval run: %+v", env)
		}
		id := env.Approval.ID
		if !strings.Contains(text(res), "avfs approval grant "+id) || !strings.Contains(text(res), `"approval": "`+id+`"`) {
			t.Fatalf("text: %q", text(res))
		}
		var ap struct {
			ID, Status string
		}
		structured(t, call(t, s, "approval_status", map[string]any{"id": id}), &ap)
		if ap.ID != id || ap.Status != "pending" {
			t.Fatalf("approval_status: %+v", ap)
		}
		a.ok("approval", "grant", id)
		_, env = execEnvelope(t, s, map[string]any{"argv": []string{"touch", "plain.txt"}, "approval": id}, false)
		if env.Process == nil || env.ChangesTotal != 1 || env.Approval == nil || env.Approval.Status != "used" {
			t.Fatalf("approved run: %+v", env)
		}
	})

	for _, c := range []struct {
		name   string
		answer *mcp.ElicitResult
		ran    bool
		status string
	}{
		{"elicitation accepted", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, true, "used"},
		{"elicitation declined", &mcp.ElicitResult{Action: "decline"}, false, "denied"},
		{"elicitation cancelled", &mcp.ElicitResult{Action: "cancel"}, false, "pending"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked []string
			var mu sync.Mutex
			opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, req.Params.Message)
				return c.answer, nil
			}}
			s := a.mcpSession(opts, "--bundle", bundle)
			file := strings.ReplaceAll(c.name, " ", "-") + ".txt"
			res, env := execEnvelope(t, s, map[string]any{"argv": []string{"touch", file}}, !c.ran)
			mu.Lock()
			if len(asked) != 1 || !strings.Contains(asked[0], "touch "+file) || !strings.Contains(asked[0], "proxytest.approval.harmless") {
				t.Fatalf("asked: %q", asked)
			}
			mu.Unlock()
			if env.Approval == nil {
				t.Fatalf("no approval: %+v", env)
			}
			if c.ran != (env.Process != nil && env.ChangesTotal == 1) {
				t.Fatalf("ran: %+v %q", env, text(res))
			}
			equal(t, "approval status", a.approvalStatus(env.Approval.ID), c.status)
		})
	}
}

// procsWith lists the processes whose command line contains marker.
func procsWith(marker string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			found = append(found, d)
		}
	}
	return found
}

func TestMCPCancel(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	s := a.mcpSession(nil)
	marker := "30.7319" // a duration no other test sleeps
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"shell": "sleep " + marker + " & sleep " + marker + "; wait", "readonly": true}})
		done <- err
	}()
	waitFor(t, 20*time.Second, "the command started", func() bool { return len(procsWith("sleep "+marker)) >= 2 })
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled call returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	waitFor(t, 10*time.Second, "the process tree is gone", func() bool { return len(procsWith("sleep "+marker)) == 0 })
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancellation took %s", d)
	}
	// The server goes on serving.
	_, env := execEnvelope(t, s, map[string]any{"argv": []string{"true"}}, false)
	equal(t, "exit", env.Process.ExitCode, 0)
}

// TestMCPSessionEnd closes stdin while a command runs: avfs mcp ends it
// and cleans up (the run directory is checked at cleanup) before it exits.
// (The SDK's own ClientSession.Close waits for calls in flight, so the test
// closes the pipe itself.)
func TestMCPSessionEnd(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	cmd := a.mcpCmd()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c := mcp.NewClient(&mcp.Implementation{Name: "avfs-test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "30.7323" // a duration no other test sleeps
	go s.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"sleep", marker}}})
	waitFor(t, 20*time.Second, "the command started", func() bool { return len(procsWith("sleep "+marker)) == 1 })
	stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("avfs mcp: %v", err)
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("avfs mcp did not exit after its stdin closed")
	}
	if p := procsWith("sleep " + marker); len(p) != 0 {
		t.Fatalf("left running: %v", p)
	}
}

func TestMCPProgress(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	var mu sync.Mutex
	var got []string
	s := a.mcpSession(&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, req.Params.Message)
	}})
	p := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"sleep", "1.5"}, "readonly": true}}
	p.SetProgressToken("tok-1")
	res, err := s.CallTool(context.Background(), p)
	if err != nil || res.IsError {
		t.Fatalf("exec: %v %+v", err, res)
	}
	// Notifications may arrive after the result, and not necessarily in
	// order: wait for the last one.
	has := func(prefix string) bool {
		return slices.ContainsFunc(got, func(m string) bool { return strings.HasPrefix(m, prefix) })
	}
	waitFor(t, 5*time.Second, "the done notification", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return has("done: ")
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 3 || !has("started: sleep 1.5") || !has("running: sleep 1.5 (1s)") {
		t.Fatalf("progress: %q", got)
	}
}

// startMCPHTTP starts `avfs mcp --listen 127.0.0.1:0 args…` and returns its
// URL, read from the line it prints on stderr.
func (a *avfs) startMCPHTTP(args ...string) string {
	url, _ := a.startMCPHTTPCmd(args...)
	return url
}

func (a *avfs) startMCPHTTPCmd(args ...string) (string, *exec.Cmd) {
	a.t.Helper()
	cmd := a.mcpCmd(append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		a.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		a.t.Fatalf("avfs mcp --listen: %v (%q)", err, line)
	}
	const prefix = "avfs mcp: serving Streamable HTTP on "
	if !strings.HasPrefix(line, prefix) {
		a.t.Fatalf("avfs mcp --listen: %q", line)
	}
	go io.Copy(io.Discard, stderr)
	return strings.TrimSpace(strings.TrimPrefix(line, prefix)), cmd
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestMCPHTTP(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	connect := func(url string, hc *http.Client) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "avfs-test", Version: "1"}, nil)
		s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}

	t.Run("loopback", func(t *testing.T) {
		s, err := connect(a.startMCPHTTP(), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, env := execEnvelope(t, s, map[string]any{"shell": "echo over http"}, false)
		equal(t, "stdout", env.Process.Stdout, "over http\n")
		_, env = execEnvelope(t, s, map[string]any{"argv": []string{"cat", "/var/log/syslog"}}, true)
		equal(t, "decision", env.Decision, wire.Deny)
	})

	t.Run("token", func(t *testing.T) {
		b := *a
		b.env = append(slices.Clone(a.env), mcpTokenEnv+"=s3cret-token")
		url := b.startMCPHTTP()
		if _, err := connect(url, nil); err == nil {
			t.Fatal("connected without the token")
		}
		if _, err := connect(url, &http.Client{Transport: bearer{"wrong"}}); err == nil {
			t.Fatal("connected with a wrong token")
		}
		s, err := connect(url, &http.Client{Transport: bearer{"s3cret-token"}})
		if err != nil {
			t.Fatal(err)
		}
		_, env := execEnvelope(t, s, map[string]any{"argv": []string{"true"}}, false)
		equal(t, "exit", env.Process.ExitCode, 0)
	})

	t.Run("SIGTERM ends running calls", func(t *testing.T) {
		url, cmd := a.startMCPHTTPCmd()
		s, err := connect(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		const marker = "30.7321" // a duration no other test sleeps
		done := make(chan error, 1)
		go func() {
			_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"sleep", marker}}})
			done <- err
		}()
		waitFor(t, 20*time.Second, "the command started", func() bool { return len(procsWith("sleep "+marker)) == 1 })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Fatal("avfs mcp did not exit after SIGTERM")
		}
		<-done // the call ends with the server, answered or not
		if p := procsWith("sleep " + marker); len(p) != 0 {
			t.Fatalf("left running: %v", p)
		}
		// Nothing left in the run directory either (checked at cleanup).
	})

	t.Run("not loopback without a token", func(t *testing.T) {
		r := a.exec(nil, "mcp", "--listen", "0.0.0.0:0")
		if r.code != wire.ExitUsage || !strings.Contains(string(r.stderr), "not a loopback address") {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	})
}

// TestMCPWire pins the wire format: literal JSON-RPC lines piped into avfs
// mcp, the answers checked, the tools/list result against a golden file
// (rewrite it with go test ./cmd/avfs -run TestMCPWire -update-mcp).
func TestMCPWire(t *testing.T) {
	t.Parallel()
	a := newProxyAVFS(t)
	cmd := a.mcpCmd("--bundle", approvalBundle(t))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<24)
	// read reads the next message that is not a notification.
	read := func() map[string]any {
		t.Helper()
		for lines.Scan() {
			var msg map[string]any
			if err := json.Unmarshal(lines.Bytes(), &msg); err != nil {
				t.Fatalf("message %q: %v", lines.Bytes(), err)
			}
			if msg["jsonrpc"] != "2.0" {
				t.Fatalf("message %s", lines.Bytes())
			}
			if msg["id"] != nil {
				return msg
			}
		}
		t.Fatalf("avfs mcp ended: %v", lines.Err())
		return nil
	}
	// send writes one line; with an id, it reads the answer to it.
	send := func(line string, id int) map[string]any {
		t.Helper()
		if _, err := io.WriteString(in, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if id == 0 {
			return nil
		}
		msg := read()
		if msg["id"] != float64(id) || msg["result"] == nil {
			t.Fatalf("answer to %s: %v", line, msg)
		}
		return msg["result"].(map[string]any)
	}

	init := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`, 1)
	info, _ := init["serverInfo"].(map[string]any)
	if init["protocolVersion"] != "2025-06-18" || info["name"] != "avfs" || init["capabilities"].(map[string]any)["tools"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0)

	tools := send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 2)
	got, err := json.MarshalIndent(tools, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "mcp", "tools_list.json")
	if *updateMCP {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/avfs -run TestMCPWire -update-mcp)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("tools/list differs from %s (rewrite it with -update-mcp if intended):\n%s", golden, got)
	}

	res := send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["echo","raw"],"readonly":true}}}`, 3)
	sc, _ := res["structuredContent"].(map[string]any)
	proc, _ := sc["process"].(map[string]any)
	content, _ := res["content"].([]any)
	if res["isError"] != nil || sc["kind"] != wire.EnvelopeKind || sc["decision"] != string(wire.Allow) || proc["stdout"] != "raw\n" || len(content) != 1 {
		t.Fatalf("tools/call exec: %v", res)
	}
	res = send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["cat","/var/log/syslog"]}}}`, 4)
	if sc, _ := res["structuredContent"].(map[string]any); res["isError"] != true || sc["decision"] != string(wire.Deny) || sc["process"] != nil {
		t.Fatalf("tools/call denied exec: %v", res)
	}

	// require_approval on this protocol version: the server asks with
	// elicitation/create, the answer grants the approval and the call runs.
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["touch","wired.txt"]}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	ask := read()
	params, _ := ask["params"].(map[string]any)
	if ask["method"] != "elicitation/create" || !strings.Contains(fmt.Sprint(params["message"]), "touch wired.txt") {
		t.Fatalf("want elicitation/create, got %v", ask)
	}
	askID, _ := json.Marshal(ask["id"])
	res = send(`{"jsonrpc":"2.0","id":`+string(askID)+`,"result":{"action":"accept","content":{"approve":true}}}`, 5)
	sc, _ = res["structuredContent"].(map[string]any)
	ap, _ := sc["approval"].(map[string]any)
	if res["isError"] != nil || ap["status"] != "used" || sc["changes_total"] != float64(1) {
		t.Fatalf("tools/call exec after elicitation: %v", res)
	}
}
