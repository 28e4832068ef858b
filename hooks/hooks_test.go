package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fakeDecider answers every command with verdict (or err, or a panic, or
// blocks until the context ends), and records what it was asked.
type fakeDecider struct {
	verdict Verdict
	err     error
	panics  bool
	hangs   bool
	release chan struct{} // ends a hanging Decide (nil: never)
	asked   []Command
}

func (f *fakeDecider) Decide(ctx context.Context, c Command) (Verdict, error) {
	f.asked = append(f.asked, c)
	switch {
	case f.panics:
		panic("decider broke")
	case f.hangs:
		<-ctx.Done()
		<-f.release // a decider that ignores its context too
		return Verdict{}, ctx.Err()
	case f.err != nil:
		return Verdict{}, f.err
	}
	return f.verdict, nil
}

var (
	reasonAllow = wire.Reason{ID: "avfs.allow.readonly", Message: "Read-only commands run", Decision: wire.Allow}
	reasonCP    = wire.Reason{ID: "avfs.checkpoint.changes", Message: "Commands that may change the vault run after a checkpoint: > out.txt", Decision: wire.AllowWithCheckpoint}
	reasonDeny  = wire.Reason{ID: "avfs.deny.outside_view", Message: "/var/log/syslog is outside the sandbox's view", Decision: wire.Deny}
	reasonAppr  = wire.Reason{ID: "avfs.approval.network", Message: "Network access needs approval: curl", Decision: wire.RequireApproval}
)

// verdicts are the decisions every harness is tested with.
var verdicts = map[string]Verdict{
	"allow":                 {Decision: wire.Allow, Reasons: []wire.Reason{reasonAllow}, Vault: "default"},
	"allow_with_checkpoint": {Decision: wire.AllowWithCheckpoint, Reasons: []wire.Reason{reasonCP}, Vault: "default"},
	"deny":                  {Decision: wire.Deny, Reasons: []wire.Reason{reasonDeny}, Vault: "default"},
	"require_approval":      {Decision: wire.RequireApproval, Reasons: []wire.Reason{reasonAppr}, Vault: "default", Approval: &Approval{ID: "ap-0123456789abcdef", Status: "pending"}},
	"approval_granted":      {Decision: wire.RequireApproval, Reasons: []wire.Reason{reasonAppr}, Vault: "default", Approval: &Approval{ID: "ap-0123456789abcdef", Status: "granted"}},
}

var testOptions = Options{Exe: "/usr/local/bin/avfs", Project: "/home/u/proj"}

func readPayload(t *testing.T, h Harness, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", string(h), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares an answer with testdata/golden/<name>: its exit status,
// stderr and stdout.
func golden(t *testing.T, name string, a Answer) {
	t.Helper()
	got := fmt.Sprintf("exit %d\nstderr: %q\n%s", a.Exit, a.Stderr, a.Stdout)
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./hooks -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestGoldenDecisions(t *testing.T) {
	cases := []struct {
		h        Harness
		payload  string
		headless bool
	}{
		{ClaudeCode, "pre_bash.json", false},
		{Codex, "pre_bash.json", false},
		{Gemini, "before_shell.json", false},
	}
	for _, c := range cases {
		for name, v := range verdicts {
			t.Run(string(c.h)+"/"+name, func(t *testing.T) {
				d := &fakeDecider{verdict: v}
				a := Run(context.Background(), c.h, d, testOptions, bytes.NewReader(readPayload(t, c.h, c.payload)))
				golden(t, filepath.Join(string(c.h), name+".out"), a)
				if len(d.asked) != 1 {
					t.Fatalf("asked %d times", len(d.asked))
				}
			})
		}
	}
	// Claude Code without a person: defer instead of ask.
	o := testOptions
	o.Headless = true
	a := Run(context.Background(), ClaudeCode, &fakeDecider{verdict: verdicts["require_approval"]}, o, bytes.NewReader(readPayload(t, ClaudeCode, "pre_bash.json")))
	golden(t, "claude-code/require_approval_headless.out", a)
}

// TestAskedCommand checks what the adapters ask the decider: the script
// as given, in the vault directory of the payload's cwd.
func TestAskedCommand(t *testing.T) {
	cases := []struct {
		h       Harness
		payload string
		want    Command
	}{
		{ClaudeCode, "pre_bash.json", Command{Script: "echo 'it''s' > out.txt && cat out.txt", Cwd: "/src", Timeout: 2 * time.Minute}},
		{Codex, "pre_bash.json", Command{Script: "go test ./...", Cwd: "/"}},
		{Gemini, "before_shell.json", Command{Script: "npm test", Cwd: "/web"}},
	}
	for _, c := range cases {
		d := &fakeDecider{verdict: verdicts["allow"]}
		Run(context.Background(), c.h, d, testOptions, bytes.NewReader(readPayload(t, c.h, c.payload)))
		if len(d.asked) != 1 || d.asked[0] != c.want {
			t.Errorf("%s: asked %+v, want %+v", c.h, d.asked, c.want)
		}
	}
}

// TestNoOpinion: tools avfs has no rules for, and events it does not
// answer, get exit 0 and no output, and the decider is not asked.
func TestNoOpinion(t *testing.T) {
	cases := []struct {
		h       Harness
		payload string
	}{
		{ClaudeCode, "pre_edit.json"},
		{ClaudeCode, "post_bash_plain.json"},
		{Codex, "pre_apply_patch.json"},
		{Gemini, "before_write_file.json"},
	}
	for _, c := range cases {
		d := &fakeDecider{err: errors.New("must not be asked")}
		a := Run(context.Background(), c.h, d, testOptions, bytes.NewReader(readPayload(t, c.h, c.payload)))
		if a.Exit != 0 || len(a.Stdout) != 0 || a.Stderr != "" || len(d.asked) != 0 {
			t.Errorf("%s %s: %+v, asked %d", c.h, c.payload, a, len(d.asked))
		}
	}
}

func TestClaudePostToolUse(t *testing.T) {
	a := Run(context.Background(), ClaudeCode, &fakeDecider{}, testOptions, bytes.NewReader(readPayload(t, ClaudeCode, "post_bash_envelope.json")))
	golden(t, "claude-code/post_tool_use.out", a)
	// An envelope without a checkpoint or changes says nothing; nor does
	// output that is not one envelope.
	for _, stdout := range []string{
		`{"schema_version":1,"kind":"proxy_exec_result","id":"ex-1","vault":"default","decision":"allow","checkpoint":null,"changes":[],"changes_total":0}`,
		`{"kind":"something_else"}`,
		`{"schema_version":1,"kind":"proxy_exec_result","id":"ex-1"} trailing`,
		`not json`,
	} {
		payload := fmt.Sprintf(`{"hook_event_name":"PostToolUse","tool_name":"Bash","cwd":"/p","tool_input":{"command":"x"},"tool_response":{"stdout":%q}}`, stdout)
		a := Run(context.Background(), ClaudeCode, &fakeDecider{}, testOptions, strings.NewReader(payload))
		if a.Exit != 0 || len(a.Stdout) != 0 {
			t.Errorf("stdout %q: %+v", stdout, a)
		}
	}
}

// TestFailClosed: whatever goes wrong, the harness's blocking answer.
func TestFailClosed(t *testing.T) {
	big := `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"` + strings.Repeat("x", 2048) + `"}}`
	cases := []struct {
		name    string
		decider *fakeDecider
		stdin   string
		max     int64
		want    string // in the reason
	}{
		{"garbage", &fakeDecider{verdict: verdicts["allow"]}, "this is not json", 0, "not valid JSON"},
		{"empty", &fakeDecider{verdict: verdicts["allow"]}, "", 0, "not valid JSON"},
		{"two documents", &fakeDecider{verdict: verdicts["allow"]}, `{"hook_event_name":"x"} {}`, 0, "more than one"},
		{"no event", &fakeDecider{verdict: verdicts["allow"]}, `{"tool_name":"Bash"}`, 0, "no hook_event_name"},
		{"oversized", &fakeDecider{verdict: verdicts["allow"]}, big, 1024, "larger than 1024 bytes"},
		{"broken bundle", &fakeDecider{err: wire.Errorf(wire.CodeBundleInvalid, "policy/x.rego:3: rego_parse_error")}, "", 0, "rego_parse_error"},
		{"panic", &fakeDecider{panics: true}, "", 0, "panic: decider broke"},
		{"timeout", &fakeDecider{hangs: true}, "", 0, "no decision within 50ms"},
		{"unknown decision", &fakeDecider{verdict: Verdict{Decision: "maybe", Vault: "default"}}, "", 0, `unknown decision "maybe"`},
		{"approval without id", &fakeDecider{verdict: Verdict{Decision: wire.RequireApproval, Vault: "default"}}, "", 0, "without an approval"},
	}
	payloads := map[Harness]string{ClaudeCode: "pre_bash.json", Codex: "pre_bash.json", Gemini: "before_shell.json"}
	for _, c := range cases {
		for _, h := range Harnesses {
			t.Run(c.name+"/"+string(h), func(t *testing.T) {
				stdin := c.stdin
				if stdin == "" && c.name != "empty" {
					stdin = string(readPayload(t, h, payloads[h]))
				}
				o := testOptions
				o.Timeout, o.MaxInput = 50*time.Millisecond, c.max
				if c.name != "timeout" {
					o.Timeout = 10 * time.Second
				}
				d := *c.decider // each run its own: a hanging one outlives its run
				d.release = make(chan struct{})
				t.Cleanup(func() { close(d.release) })
				a := Run(context.Background(), h, &d, o, strings.NewReader(stdin))
				checkBlocked(t, h, a, c.want)
			})
		}
	}
}

// checkBlocked checks a is h's blocking answer with want in the reason.
func checkBlocked(t *testing.T, h Harness, a Answer, want string) {
	t.Helper()
	switch h {
	case ClaudeCode, Gemini:
		if a.Exit != 2 || len(a.Stdout) != 0 || !strings.Contains(a.Stderr, want) {
			t.Errorf("want exit 2 with %q on stderr, got %+v", want, a)
		}
	case Codex:
		var out CodexOutput
		err := json.Unmarshal(a.Stdout, &out)
		if err != nil || a.Exit != 0 || out.HookSpecificOutput.PermissionDecision != CodexDeny || !strings.Contains(out.HookSpecificOutput.PermissionDecisionReason, want) {
			t.Errorf("want a deny naming %q, got exit %d %s (%v)", want, a.Exit, a.Stdout, err)
		}
	}
}

// TestRewriteQuoting runs the rewrite's arguments through a real shell:
// every script comes back as one word, unchanged.
func TestRewriteQuoting(t *testing.T) {
	for _, script := range []string{"echo 'a b' \"$HOME\" `id` $(id); x", "it's", "", "-n", "a\nb", `\'`} {
		line := Rewrite("printf", "my vault", Command{Script: script, Cwd: "/a b"}, "ap-1")
		// printf %s\0 prints each argument after the program.
		out, err := exec.Command("/bin/sh", "-c", strings.Replace(line, "printf", "printf '%s\\0'", 1)).Output()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		args := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		want := []string{"--vault", "my vault", "--json", "proxy", "exec", "--cwd", "/a b", "--approval", "ap-1", "--shell", script}
		if fmt.Sprint(args) != fmt.Sprint(want) || len(args) != len(want) {
			t.Errorf("%q: got %q", script, args)
		}
	}
}

func TestVaultCwd(t *testing.T) {
	for _, c := range []struct{ project, cwd, want string }{
		{"/p", "/p", "/"},
		{"/p", "/p/src/x", "/src/x"},
		{"/p", "/other", "/"},
		{"/p", "/p/../q", "/"},
		{"/p", "/pq", "/"},
		{"", "/p", "/"},
	} {
		if got := vaultCwd(c.project, c.cwd); got != c.want {
			t.Errorf("vaultCwd(%q, %q) = %q, want %q", c.project, c.cwd, got, c.want)
		}
	}
}

func TestParseRewrite(t *testing.T) {
	const exe = "/usr/local/bin/avfs"
	for _, c := range []struct {
		c        Command
		approval string
	}{
		{Command{Script: "ls", Cwd: "/"}, ""},
		{Command{Script: "echo 'a b' \"$HOME\" `id` $(id); x", Cwd: "/a b", Timeout: 2 * time.Minute}, "ap-1"},
		{Command{Script: "it's\nnew line", Cwd: "/src"}, ""},
	} {
		line := Rewrite(exe, "my vault", c.c, c.approval)
		vault, got, approval, ok := ParseRewrite(exe, "", line)
		c.c.Vault = "my vault" // read back from --vault
		if !ok || vault != "my vault" || got != c.c || approval != c.approval {
			t.Errorf("%q: %v %q %+v %q", line, ok, vault, got, approval)
		}
	}
	good := Rewrite(exe, "default", Command{Script: "ls -l", Cwd: "/"}, "")
	for _, bad := range []string{
		good + "; rm -rf ~",
		good + " && rm -rf ~",
		good + " > /etc/passwd",
		good + " &",
		"X=1 " + good,
		"! " + good,
		strings.Replace(good, exe, "/tmp/avfs", 1),
		strings.Replace(good, "'ls -l'", "\"$(rm -rf ~)\"", 1),
		strings.Replace(good, "'ls -l'", "$'ls -l'", 1),
		strings.Replace(good, "'ls -l'", "ls\\ -l", 1), // the same word, spelt otherwise
		strings.Replace(good, "--shell", "--sandbox none --shell", 1),
		strings.Replace(good, "--cwd /", "--cwd  /", 1),
		"ls",
		"",
	} {
		if _, _, _, ok := ParseRewrite(exe, "", bad); ok {
			t.Errorf("taken for a rewrite: %q", bad)
		}
	}
	// Through avfs serve: the rewrite carries --server, and only the
	// hook's own socket is read back.
	const sock = "/run/avfs serve.sock"
	c := Command{Script: "ls", Cwd: "/src", Server: sock}
	line := Rewrite(exe, "default", c, "ap-1")
	if !strings.Contains(line, " proxy exec --server '"+sock+"' --cwd ") {
		t.Fatalf("rewrite %q does not name the server", line)
	}
	c.Vault = "default"
	if _, got, approval, ok := ParseRewrite(exe, sock, line); !ok || got != c || approval != "ap-1" {
		t.Errorf("%q: %v %+v %q", line, ok, got, approval)
	}
	for server, command := range map[string]string{
		"":         line,                                                            // a server the hook was not given
		"/other":   line,                                                            // another socket
		sock + "x": line,                                                            // not a prefix match either
		sock:       Rewrite(exe, "default", Command{Script: "ls", Cwd: "/src"}, ""), // the hook's server missing
	} {
		if _, _, _, ok := ParseRewrite(exe, server, command); ok {
			t.Errorf("server %q: taken for a rewrite: %q", server, command)
		}
	}
}

// TestRewriteServer: with Options.Server, the allow's rewrite runs
// through that avfs serve.
func TestRewriteServer(t *testing.T) {
	o := testOptions
	o.Server = "/run/avfs.sock"
	p, err := decideShell(context.Background(), &fakeDecider{verdict: Verdict{Decision: wire.Allow, Vault: "default"}}, o, Command{Script: "ls", Cwd: "/"})
	if err != nil || p.kind != planAllow || p.command != Rewrite(o.Exe, "default", Command{Script: "ls", Cwd: "/", Server: o.Server}, "") {
		t.Fatalf("%+v %v", p, err)
	}
	if !strings.Contains(p.command, "--server /run/avfs.sock") {
		t.Fatalf("rewrite %q", p.command)
	}
}

// TestCodexPermissionRequest: a raw command is answered from the
// decision and the approval store; avfs's own rewrite is approved
// without asking the decider; an error is a deny.
func TestCodexPermissionRequest(t *testing.T) {
	payload := readPayload(t, Codex, "permission_request.json")
	for name, v := range verdicts {
		t.Run(name, func(t *testing.T) {
			a := Run(context.Background(), Codex, &fakeDecider{verdict: v}, testOptions, bytes.NewReader(payload))
			golden(t, filepath.Join("codex", "permission_"+name+".out"), a)
		})
	}
	rewrite := Rewrite(testOptions.Exe, "default", Command{Script: "curl -sI https://example.com", Cwd: "/"}, "ap-0123456789abcdef")
	in, _ := json.Marshal(CodexInput{Cwd: "/home/u/proj", HookEventName: "PermissionRequest", ToolName: "Bash", ToolInput: CodexToolInput{Command: rewrite}})
	d := &fakeDecider{err: errors.New("must not be asked")}
	a := Run(context.Background(), Codex, d, testOptions, bytes.NewReader(in))
	golden(t, "codex/permission_rewrite.out", a)
	if len(d.asked) != 0 {
		t.Error("the decider was asked about avfs's own rewrite")
	}
	// Not quite the rewrite: decided like any command.
	in, _ = json.Marshal(CodexInput{Cwd: "/home/u/proj", HookEventName: "PermissionRequest", ToolName: "Bash", ToolInput: CodexToolInput{Command: rewrite + "; rm -rf ~"}})
	a = Run(context.Background(), Codex, &fakeDecider{err: errors.New("vault_busy")}, testOptions, bytes.NewReader(in))
	var out CodexPermissionOutput
	if err := json.Unmarshal(a.Stdout, &out); err != nil || out.HookSpecificOutput.Decision.Behavior != CodexBehaviorDeny || !strings.Contains(out.HookSpecificOutput.Decision.Message, "vault_busy") {
		t.Errorf("error: %s %v", a.Stdout, err)
	}
}

// TestClaudePermissionRequest: a raw command is answered from the
// decision; avfs's rewrite with a granted approval is allowed, with a
// pending one (or none) left to the person.
func TestClaudePermissionRequest(t *testing.T) {
	payload := readPayload(t, ClaudeCode, "permission_request.json")
	for name, v := range verdicts {
		t.Run(name, func(t *testing.T) {
			a := Run(context.Background(), ClaudeCode, &fakeDecider{verdict: v}, testOptions, bytes.NewReader(payload))
			golden(t, filepath.Join("claude-code", "permission_"+name+".out"), a)
		})
	}
	rewrite := func(approval string) []byte {
		cmd := Rewrite(testOptions.Exe, "default", Command{Script: "curl https://example.com", Cwd: "/"}, approval)
		ti, _ := json.Marshal(ClaudeBashInput{Command: cmd})
		b, _ := json.Marshal(ClaudeInput{Cwd: "/home/u/proj", HookEventName: "PermissionRequest", ToolName: "Bash", ToolInput: ti})
		return b
	}
	a := Run(context.Background(), ClaudeCode, &fakeDecider{verdict: verdicts["approval_granted"]}, testOptions, bytes.NewReader(rewrite("ap-0123456789abcdef")))
	golden(t, "claude-code/permission_rewrite_granted.out", a)
	for name, c := range map[string]struct {
		v        Verdict
		approval string
	}{
		"pending":       {verdicts["require_approval"], "ap-0123456789abcdef"},
		"another id":    {verdicts["approval_granted"], "ap-ffffffffffffffff"},
		"no approval":   {verdicts["allow"], ""},
		"another vault": {Verdict{Decision: wire.RequireApproval, Vault: "other", Approval: &Approval{ID: "ap-0123456789abcdef", Status: "granted"}}, "ap-0123456789abcdef"},
	} {
		a := Run(context.Background(), ClaudeCode, &fakeDecider{verdict: c.v}, testOptions, bytes.NewReader(rewrite(c.approval)))
		if a.Exit != 0 || len(a.Stdout) != 0 {
			t.Errorf("%s: %+v", name, a)
		}
	}
	a = Run(context.Background(), ClaudeCode, &fakeDecider{err: errors.New("vault_busy")}, testOptions, bytes.NewReader(payload))
	var out ClaudePermissionOutput
	if err := json.Unmarshal(a.Stdout, &out); err != nil || out.HookSpecificOutput.Decision.Behavior != ClaudeBehaviorDeny || !strings.Contains(out.HookSpecificOutput.Decision.Message, "vault_busy") {
		t.Errorf("error: %s %v", a.Stdout, err)
	}
}
