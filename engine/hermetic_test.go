package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"avfs/bundles"
	"avfs/policies"
	"avfs/wire"
)

// writeBundle writes a bundle of one module, policy.rego, in a temporary
// directory and returns the directory.
func writeBundle(t *testing.T, rego string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// compile loads the bundle at dir alone and compiles it with opts.
func compile(t *testing.T, dir string, opts PolicyOptions) (*Policy, error) {
	t.Helper()
	set, err := bundles.Load(context.Background(), bundles.Options{Paths: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	return NewPolicy(context.Background(), set, opts)
}

// TestRefusedBuiltins: a bundle that calls a builtin reaching the network or
// not deterministic is bundle_invalid at compile time, naming the builtin and
// where the call is, unless AllowNondeterministic.
func TestRefusedBuiltins(t *testing.T) {
	const header = "package avfs\n\ndecision := {\"decision\": \"allow\", \"reasons\": []}\n\n"
	tests := []struct {
		builtin string
		rule    string // on row 5 of policy.rego, the call at col 1 of row 6
		why     string
	}{
		{"http.send", "r if {\n\thttp.send({\"method\": \"get\", \"url\": \"http://localhost\"}).status_code == 200\n}", "network"},
		{"net.lookup_ip_addr", "r if {\n\tnet.lookup_ip_addr(\"example.com\")\n}", "network"},
		{"time.now_ns", "r if {\n\ttime.now_ns() > 0\n}", "clock"},
		{"rand.intn", "r if {\n\trand.intn(\"k\", 10) > 0\n}", "random"},
		{"uuid.rfc4122", "r if {\n\tuuid.rfc4122(\"k\") != \"\"\n}", "random"},
		{"opa.runtime", "r if {\n\topa.runtime().env\n}", "environment"},
	}
	for _, tt := range tests {
		t.Run(tt.builtin, func(t *testing.T) {
			dir := writeBundle(t, header+tt.rule+"\n")
			_, err := compile(t, dir, PolicyOptions{})
			if !wire.HasCode(err, wire.CodeBundleInvalid) {
				t.Fatalf("err = %v, want bundle_invalid", err)
			}
			d := wire.ErrorObject(err)
			file, _ := d["file"].(string)
			if d["builtin"] != tt.builtin || file != filepath.Join(dir, "policy.rego") || d["row"] != 6 || d["col"] != 2 {
				t.Errorf("details = %v, want builtin %s at %s:6:2", d, tt.builtin, filepath.Join(dir, "policy.rego"))
			}
			for _, want := range []string{tt.builtin, tt.why, "policy.allow_nondeterministic", "policy.rego:6"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not mention %q", err, want)
				}
			}
			if _, err := compile(t, dir, PolicyOptions{AllowNondeterministic: true}); err != nil {
				t.Errorf("with AllowNondeterministic: %v", err)
			}
		})
	}
	t.Run("trace and print are fine", func(t *testing.T) {
		dir := writeBundle(t, header+"r if {\n\ttrace(\"x\")\n\tprint(\"y\")\n}\n")
		if _, err := compile(t, dir, PolicyOptions{}); err != nil {
			t.Error(err)
		}
	})
	t.Run("another compile error is not a refusal", func(t *testing.T) {
		dir := writeBundle(t, header+"r if {\n\tno.such_builtin(1)\n}\n")
		_, err := compile(t, dir, PolicyOptions{})
		if d := wire.ErrorObject(err); !wire.HasCode(err, wire.CodeBundleInvalid) || d["builtin"] != nil || d["row"] != 6 {
			t.Errorf("err = %v, details %v", err, d)
		}
	})
}

// TestRefusedBuiltinsTable: the table holds every builtin OPA marks
// non-deterministic and the network ones, each with a reason.
func TestRefusedBuiltinsTable(t *testing.T) {
	names := map[string]string{}
	for _, b := range RefusedBuiltins() {
		if b.Why == "" {
			t.Errorf("%s has no reason", b.Name)
		}
		names[b.Name] = b.Why
	}
	for _, name := range []string{"http.send", "net.lookup_ip_addr", "time.now_ns", "rand.intn", "uuid.rfc4122", "opa.runtime", "io.jwt.decode_verify"} {
		if names[name] == "" {
			t.Errorf("%s is not refused", name)
		}
	}
	for _, name := range []string{"trace", "print", "time.parse_rfc3339_ns", "regex.match", "sprintf"} {
		if names[name] != "" {
			t.Errorf("%s is refused", name)
		}
	}
	caps := Capabilities(false)
	for name := range names {
		if caps.ContainsBuiltin(name) {
			t.Errorf("Capabilities(false) has %s", name)
		}
		if !Capabilities(true).ContainsBuiltin(name) {
			t.Errorf("Capabilities(true) lacks %s", name)
		}
	}
}

// slowPolicy decides only after about 10^10 steps.
const slowPolicy = `package avfs

slow := count([x |
	some x in numbers.range(1, 100000)
	some y in numbers.range(1, 100000)
	x + y < 0
])

decision := {"decision": "allow", "reasons": [], "sandbox": {"network": "host"}} if slow == 0
`

// TestEvalTimeout: a decision that runs past the deadline is interrupted and
// denied, never allowed.
func TestEvalTimeout(t *testing.T) {
	p, err := compile(t, writeBundle(t, slowPolicy), PolicyOptions{EvalTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, explain := range []string{ExplainOff, ExplainNotes} {
		t.Run("explain="+explain, func(t *testing.T) {
			start := time.Now()
			res, err := p.Decide(context.Background(), cmdInput("ls"), DecideOptions{Explain: explain})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if took > 1500*time.Millisecond {
				t.Errorf("Decide took %s with a deadline of 200ms", took)
			}
			if res.Decision != wire.Deny || res.Sandbox != (wire.SandboxGrant{}) || !IsFailClosed(res) || len(res.Reasons) != 1 {
				t.Fatalf("got %+v, want a deny for the deadline", res)
			}
			if r := res.Reasons[0]; r.ID != ReasonEvalTimeout || r.Decision != wire.Deny || !strings.Contains(r.Message, "200ms") {
				t.Errorf("reason %+v", r)
			}
		})
	}
	t.Run("a caller's deadline fails closed", func(t *testing.T) {
		p, err := compile(t, writeBundle(t, slowPolicy), PolicyOptions{EvalTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		res, err := p.Decide(ctx, cmdInput("ls"), DecideOptions{})
		if err != nil || res.Decision != wire.Deny || len(res.Reasons) != 1 || res.Reasons[0].ID != ReasonFailClosed {
			t.Errorf("got %+v, %v", res, err)
		}
	})
	t.Run("the default policy decides within the default", func(t *testing.T) {
		if defaultP(t).timeout != DefaultEvalTimeout {
			t.Errorf("timeout = %s", defaultP(t).timeout)
		}
		res, err := defaultP(t).Decide(context.Background(), cmdInput("ls"), DecideOptions{})
		if err != nil || res.Decision != wire.Allow {
			t.Errorf("got %+v, %v", res, err)
		}
	})
	t.Run("negative", func(t *testing.T) {
		if _, err := compile(t, writeBundle(t, slowPolicy), PolicyOptions{EvalTimeout: -time.Second}); !wire.HasCode(err, wire.CodeInvalidInput) {
			t.Errorf("err = %v, want invalid_input", err)
		}
	})
}

// copyDefault writes a copy of the default bundle with data.avfs.config
// changed by edit and returns its directory.
func copyDefault(t *testing.T, edit func(cfg map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, policies.FS); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	edit(data["avfs"]["config"])
	if raw, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConfigInvalid: a copy of the default bundle whose configuration data
// has the wrong shape denies every command, saying which key is wrong;
// without the check a list given as a string lets sudo through.
func TestConfigInvalid(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(cfg map[string]any)
		problem string
	}{
		{"list as a string", func(cfg map[string]any) { cfg["privileged_programs"] = "sudo" },
			"data.avfs.config.privileged_programs must be a list of strings: it is of type string"},
		{"nested list", func(cfg map[string]any) { cfg["privileged_programs"] = []any{[]any{"sudo"}} },
			"data.avfs.config.privileged_programs must be a list of strings: an element is of another type"},
		{"missing key", func(cfg map[string]any) { delete(cfg, "privileged_programs") },
			"data.avfs.config.privileged_programs must be a list of strings: it is missing"},
		{"object of strings", func(cfg map[string]any) { cfg["package_subcommands"] = map[string]any{"npm": "install"} },
			"data.avfs.config.package_subcommands must be an object of lists of strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := compile(t, copyDefault(t, tt.edit), PolicyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, argv := range [][]string{{"sudo", "ls"}, {"ls"}} {
				res, err := p.Decide(context.Background(), cmdInput(argv...), DecideOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Decision != wire.Deny || !IsFailClosed(res) || len(res.Reasons) != 1 || res.Sandbox != (wire.SandboxGrant{}) {
					t.Fatalf("%v: got %+v, want a deny for the configuration", argv, res)
				}
				if r := res.Reasons[0]; r.ID != ReasonConfigInvalid || !strings.Contains(r.Message, tt.problem) {
					t.Errorf("%v: reason %+v, want %q", argv, r, tt.problem)
				}
			}
		})
	}
	t.Run("an intact copy decides as the default", func(t *testing.T) {
		p, err := compile(t, copyDefault(t, func(map[string]any) {}), PolicyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Decide(context.Background(), cmdInput("sudo", "ls"), DecideOptions{})
		if err != nil || res.Decision != wire.Deny || !slices.Equal(reasonIDs(res.Reasons), []string{"avfs.deny.privileged"}) {
			t.Errorf("got %+v, %v", res, err)
		}
	})
	// A policy's own config_problems fails closed when it cannot be read.
	const allow = "package avfs\n\ndecision := {\"decision\": \"allow\", \"reasons\": []}\n\n"
	for _, tt := range []struct{ rule, problem string }{
		{"config_problems := {\"shells is wrong\"}", "shells is wrong"},
		{"config_problems := 1", "is 1, not a set of strings"},
		{"config_problems := [1]", "not a set of strings"},
		{"config_problems := to_number(\"x\")", "could not be evaluated"},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			p, err := compile(t, writeBundle(t, allow+tt.rule+"\n"), PolicyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Decide(context.Background(), cmdInput("ls"), DecideOptions{})
			if err != nil || res.Decision != wire.Deny || len(res.Reasons) != 1 || res.Reasons[0].ID != ReasonConfigInvalid || !strings.Contains(res.Reasons[0].Message, tt.problem) {
				t.Errorf("got %+v, %v", res, err)
			}
		})
	}
	t.Run("empty or undefined is no problem", func(t *testing.T) {
		for _, rule := range []string{"config_problems := set()", "config_problems := [] if false"} {
			p, err := compile(t, writeBundle(t, allow+rule+"\n"), PolicyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := p.Decide(context.Background(), cmdInput("ls"), DecideOptions{}); err != nil || res.Decision != wire.Allow {
				t.Errorf("%s: got %+v, %v", rule, res, err)
			}
		}
	})
}
