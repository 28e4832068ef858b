package runner

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

// hintRun is an execution that ran a command and ended as given, with
// nothing but what the hints read: a fake of the stages before.
func hintRun(sb *wire.SandboxReport, pr ProcResult, cache string, cwd string, programs ...string) *execution {
	return &execution{
		r:        &Runner{Sandbox: SandboxConfig{CacheDir: cache}},
		out:      &wire.Envelope{Sandbox: sb},
		info:     vault.Info{Name: "v1"},
		cwd:      cwd,
		view:     view{input: wire.SandboxInput{Mode: wire.SandboxNamespaces, Workspace: "/workspace", Home: "/home/u"}},
		proc:     pr,
		programs: programs,
	}
}

func text(s string) Output { return Output{Head: []byte(s), Total: int64(len(s))} }

// TestNetworkHint: a sandboxed run without the network that failed with a
// network symptom gets a network_off hint, with the approved fetch to run
// when one of its programs has one; no other run gets a hint.
func TestNetworkHint(t *testing.T) {
	held := &wire.SandboxReport{Mode: wire.SandboxNamespaces, Workspace: "/workspace", Home: "/home/u", Network: wire.NetworkNone}
	networked := &wire.SandboxReport{Mode: wire.SandboxNamespaces, Workspace: "/workspace", Home: "/home/u", Network: wire.NetworkHost}
	unheld := &wire.SandboxReport{Mode: wire.SandboxNone, Reason: "--sandbox none", Network: wire.NetworkHost}
	goFail := `main.go:2:8: golang.org/x/text@v0.14.0: Get "https://proxy.golang.org/golang.org/x/text/@v/v0.14.0.zip": dial tcp: lookup proxy.golang.org on 10.0.0.53:53: dial udp 10.0.0.53:53: connect: network is unreachable` + "\n"
	failed := func(stderr string) ProcResult { return ProcResult{ExitCode: 1, Stderr: text(stderr)} }
	long := strings.Repeat("x", hintScan)
	for _, tc := range []struct {
		name     string
		sb       *wire.SandboxReport
		pr       ProcResult
		cache    string
		cwd      string
		programs []string
		hint     bool
		command  string // the hint's command
		says     string // a part of the message
	}{
		{"go build", held, failed(goFail), "/c", "/src", []string{"go"}, true,
			"avfs --vault v1 proxy exec --cwd /src -- go mod download", "go mod download"},
		{"go in a script, at the vault root", held, failed(goFail), "/c", "/", []string{"", "cd", "go"}, true,
			"avfs --vault v1 proxy exec -- go mod download", "module cache"},
		{"go without a tool cache", held, failed(goFail), "", "/", []string{"go"}, true, "", "--sandbox none"},
		{"npm", held, failed("npm error code EAI_AGAIN\nnpm error syscall getaddrinfo\n"), "", "/web", []string{"npm"}, true,
			"avfs --vault v1 proxy exec --cwd /web -- npm install", "node_modules"},
		{"cargo", held, failed("error: failed to get `itoa` as a dependency\n  [6] Could not resolve hostname (Could not resolve host: index.crates.io)\n"),
			"/c", "/", []string{"cargo"}, true, "avfs --vault v1 proxy exec --env CARGO_HOME=/home/u/.cache/cargo -- cargo fetch", "same --env"},
		{"python", held, failed("urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>\n"), "/c", "/", []string{"python3"}, true,
			"", "host_network_reasons"},
		{"on stdout", held, ProcResult{ExitCode: 1, Stdout: text("fatal: unable to access 'https://x.example/': Could not resolve host: x.example\n")}, "/c", "/", []string{"sh"}, true, "", "Could not resolve host"},
		{"timed out", held, ProcResult{ExitCode: 143, TimedOut: true, Stderr: text("warning: spurious network error: Could not resolve host: index.crates.io\n")}, "/c", "/", []string{"cargo"}, true,
			"avfs --vault v1 proxy exec --env CARGO_HOME=/home/u/.cache/cargo -- cargo fetch", ""},
		{"in the tail of cut output", held, ProcResult{ExitCode: 1, Stderr: Output{Head: []byte(long), Tail: []byte(goFail), Total: 1 << 30, Truncated: true}}, "/c", "/", []string{"go"}, true,
			"avfs --vault v1 proxy exec -- go mod download", ""},

		{"exit 0", held, ProcResult{Stderr: text(goFail)}, "/c", "/", []string{"go"}, false, "", ""},
		{"no symptom", held, failed("main.go:3:1: syntax error\n"), "/c", "/", []string{"go"}, false, "", ""},
		{"the program was not found", held, ProcResult{ExitCode: 127, NotFound: true, Stderr: text("avfs: go: command not found\nNetwork is unreachable\n")}, "/c", "/", []string{"go"}, false, "", ""},
		{"with the network", networked, failed(goFail), "/c", "/", []string{"go"}, false, "", ""},
		{"without a sandbox", unheld, failed(goFail), "/c", "/", []string{"go"}, false, "", ""},
		{"not run", nil, failed(goFail), "/c", "/", []string{"go"}, false, "", ""},
		{"a local server that is not running", held, failed("dial tcp 127.0.0.1:5432: connect: connection refused\ncurl: (7) Failed to connect to localhost port 80: Connection refused\n"), "/c", "/", []string{"go"}, false, "", ""},
		{"permission denied", held, failed("PermissionError: [Errno 13] Permission denied\n"), "/c", "/", []string{"python3"}, false, "", ""},
		{"only in the head of cut output", held, ProcResult{ExitCode: 1, Stderr: Output{Head: []byte(goFail), Tail: []byte("FAIL\n"), Total: 1 << 30, Truncated: true}}, "/c", "/", []string{"go"}, false, "", ""},
		{"further from the end than is searched", held, failed(goFail + long), "/c", "/", []string{"go"}, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := hintRun(tc.sb, tc.pr, tc.cache, tc.cwd, tc.programs...).hints()
			if !tc.hint {
				if len(hs) != 0 {
					t.Fatalf("hints %+v, want none", hs)
				}
				return
			}
			if len(hs) != 1 || hs[0].Code != wire.HintNetworkOff {
				t.Fatalf("hints %+v, want one network_off", hs)
			}
			h := hs[0]
			if h.Command != tc.command {
				t.Errorf("command %q, want %q", h.Command, tc.command)
			}
			for _, s := range []string{tc.says, `sandbox.network "none"`, "--sandbox none", "host_network_reasons"} {
				if !strings.Contains(h.Message, s) {
					t.Errorf("the message does not say %q: %s", s, h.Message)
				}
			}
			if tc.command != "" && !strings.Contains(h.Message, "avfs approval grant ID") {
				t.Errorf("the message does not say how to grant: %s", h.Message)
			}
		})
	}
}

// TestNetworkSymptoms: each symptom is found on its own, at the very end
// of a stream, and its text is not cut by the bound.
func TestNetworkSymptoms(t *testing.T) {
	for _, s := range networkSymptoms {
		out := text(strings.Repeat("y", 2*hintScan) + s.text)
		if got := networkSymptomIn(Output{}, out); got != s.text {
			t.Errorf("%q (%s): found %q", s.text, s.by, got)
		}
		if len(s.text) > hintScan || s.by == "" || bytes.ContainsAny([]byte(s.text), "\n") {
			t.Errorf("%q: a symptom is one short line and says what prints it", s.text)
		}
	}
}

// TestNetworkHintGolden: the hint of wire's golden envelope_network_off
// is the one a run of its command gives.
func TestNetworkHintGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "wire", "testdata", "golden", "envelope_network_off.json"))
	if err != nil {
		t.Fatal(err)
	}
	var env wire.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	x := hintRun(env.Sandbox, ProcResult{ExitCode: env.Process.ExitCode, Stderr: text(env.Process.Stderr)}, "/c", env.Command.Cwd, env.Command.Argv[0])
	x.info.Name = env.Vault
	if got := x.hints(); !reflect.DeepEqual(got, env.Hints) {
		t.Errorf("hints\n got %+v\nwant %+v", got, env.Hints)
	}
}
