package engine

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"

	"avfs/bundles"
	"avfs/wire"
)

const testdata = "testdata/policy"

var (
	defaultOnce   sync.Once
	defaultPolicy *Policy
	defaultErr    error
)

// policyFor compiles a policy from bundles, failing the test on error.
func policyFor(t testing.TB, opts bundles.Options) *Policy {
	t.Helper()
	p, err := newPolicy(opts)
	if err != nil {
		t.Fatalf("policy %+v: %v", opts, err)
	}
	return p
}

func newPolicy(opts bundles.Options) (*Policy, error) {
	set, err := bundles.Load(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	return NewPolicy(context.Background(), set, PolicyOptions{})
}

// defaultP is the policy of the default bundle, compiled once.
func defaultP(t testing.TB) *Policy {
	t.Helper()
	defaultOnce.Do(func() { defaultPolicy, defaultErr = newPolicy(bundles.Options{IncludeDefault: true}) })
	if defaultErr != nil {
		t.Fatal(defaultErr)
	}
	return defaultPolicy
}

// testCase is one file of testdata/policy/cases.
type testCase struct {
	Input wire.Input `json:"input"`
	Want  struct {
		Decision wire.Decision `json:"decision"`
		Reasons  []string      `json:"reasons"`
	} `json:"want"`
}

func readCase(t testing.TB, name string) testCase {
	t.Helper()
	bs, err := os.ReadFile(filepath.Join(testdata, "cases", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c testCase
	dec := json.NewDecoder(bytes.NewReader(bs))
	dec.DisallowUnknownFields() // the cases must be shaped exactly like wire.Input
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func reasonIDs(rs []wire.Reason) []string {
	ids := []string{}
	for _, r := range rs {
		if !slices.Contains(ids, r.ID) {
			ids = append(ids, r.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

func cmdInput(argv ...string) *wire.Input {
	c := wire.Command{Argv: argv, Raw: strings.Join(argv, " "), Program: filepath.Base(argv[0]), Args: argv[1:], Origin: "argv", PipelineLen: 1}
	for _, a := range argv[1:] {
		if strings.HasPrefix(a, "-") {
			c.Flags = append(c.Flags, a)
		} else {
			c.Operands = append(c.Operands, a)
		}
	}
	return &wire.Input{SchemaVersion: wire.InputSchemaVersion, Command: c, Commands: []wire.Command{c}, Cwd: "/"}
}

// TestCases runs every input document of testdata/policy/cases through the
// default policy and checks the decision and the reason ids.
func TestCases(t *testing.T) {
	p := defaultP(t)
	files, err := filepath.Glob(filepath.Join(testdata, "cases", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			c := readCase(t, name)
			res, err := p.Decide(context.Background(), &c.Input, DecideOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(c.Want.Reasons)
			sort.Strings(want)
			if res.Decision != c.Want.Decision || !slices.Equal(reasonIDs(res.Reasons), want) {
				t.Errorf("got %s %v, want %s %v\nreasons: %+v", res.Decision, reasonIDs(res.Reasons), c.Want.Decision, want, res.Reasons)
			}
			for i := 1; i < len(res.Reasons); i++ {
				if res.Reasons[i].Decision.Rank() > res.Reasons[i-1].Decision.Rank() {
					t.Errorf("reasons not sorted from the highest decision: %+v", res.Reasons)
				}
			}
			if len(res.Bundles) != 1 || res.Bundles[0].Name != bundles.DefaultName || res.Bundles[0].Revision == "" {
				t.Errorf("bundles = %+v", res.Bundles)
			}
			if res.Trace != nil {
				t.Error("trace without explain")
			}
		})
	}
}

// TestInputValue checks the direct conversion against a JSON round trip.
func TestInputValue(t *testing.T) {
	c := readCase(t, "curl_pipe_sh")
	c.Input.Command.Assignments = map[string]string{"A": "1"}
	c.Input.Command.FlagValues = map[string]string{"--x": "y"}
	c.Input.Command.Wrappers = []wire.Wrapper{{Name: "env", Argv: []string{"env", "A=1"}, Flags: []string{}, FlagValues: map[string]string{}, Operands: []string{}}}
	c.Input.Paths = []wire.Path{{Arg: "a", Path: "/a", InsideVault: true, Where: wire.WhereVault, Source: "arg"}}
	c.Input.Vault.Quotas.MaxFiles = 7
	c.Input.Command.Code = []string{}
	for i := range c.Input.Commands {
		c.Input.Commands[i].Code = []string{}
	}
	c.Input.Sandbox = wire.SandboxInput{Mode: wire.SandboxNamespaces, Workspace: "/workspace", Home: "/root",
		ReadOnlySystem: []string{"/usr"}, Scratch: []string{"/tmp", "/root"}}
	bs, err := json.Marshal(&c.Input)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := util.UnmarshalJSON(bs, &generic); err != nil {
		t.Fatal(err)
	}
	want, err := ast.InterfaceToValue(generic)
	if err != nil {
		t.Fatal(err)
	}
	if got := InputValue(&c.Input); got.Compare(want) != 0 {
		t.Errorf("InputValue differs from the JSON form:\n got %v\nwant %v", got, want)
	}
	// The top-level command shares its term with commands[0] only when they are equal.
	c.Input.Commands[0].Raw += " (changed)"
	bs, err = json.Marshal(&c.Input)
	if err != nil {
		t.Fatal(err)
	}
	if err := util.UnmarshalJSON(bs, &generic); err != nil {
		t.Fatal(err)
	}
	if want, err = ast.InterfaceToValue(generic); err != nil {
		t.Fatal(err)
	}
	if got := InputValue(&c.Input); got.Compare(want) != 0 {
		t.Errorf("InputValue differs from the JSON form when command is not commands[0]:\n got %v\nwant %v", got, want)
	}

	// nil slices and maps are empty, not null; a nil script is null.
	v := InputValue(&wire.Input{}).(ast.Object)
	for _, k := range []string{"commands", "paths", "env"} {
		if got := v.Get(ast.StringTerm(k)); got == nil || got.Value.Compare(ast.NewArray()) != 0 {
			t.Errorf("%s = %v, want []", k, got)
		}
	}
	if got := v.Get(ast.StringTerm("script")); got.Value.Compare(ast.Null{}) != 0 {
		t.Errorf("script = %v, want null", got)
	}
	cmd := v.Get(ast.StringTerm("command")).Value.(ast.Object)
	if got := cmd.Get(ast.StringTerm("assignments")); got.Value.Compare(ast.NewObject()) != 0 {
		t.Errorf("assignments = %v, want {}", got)
	}
}

// TestFailClosed: a policy that cannot decide denies, with a reason.
func TestFailClosed(t *testing.T) {
	tests := []struct {
		bundle string
		why    string
	}{
		{"undefined", "is undefined"},
		{"maybe", `"maybe"`},
		{"conflict", "conflict"},
		{"runtime_error", "to_number"},
		{"bad_reasons", "reasons[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.bundle, func(t *testing.T) {
			p := policyFor(t, bundles.Options{Paths: []string{filepath.Join(testdata, "bundles", tt.bundle)}})
			res, err := p.Decide(context.Background(), cmdInput("ls"), DecideOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision != wire.Deny || !IsFailClosed(res) || len(res.Reasons) != 1 || res.Sandbox != (wire.SandboxGrant{}) {
				t.Fatalf("got %+v, want a fail-closed deny", res)
			}
			if r := res.Reasons[0]; r.ID != ReasonFailClosed || r.Decision != wire.Deny || !strings.Contains(r.Message, tt.why) {
				t.Errorf("reason %+v, want it to mention %q", r, tt.why)
			}
		})
	}
	t.Run("nil input", func(t *testing.T) {
		res, err := defaultP(t).Decide(context.Background(), nil, DecideOptions{})
		if err != nil || res.Decision != wire.Deny || !IsFailClosed(res) {
			t.Errorf("got %+v, %v", res, err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := defaultP(t).Decide(ctx, cmdInput("ls"), DecideOptions{})
		if err != nil || res.Decision != wire.Deny || !IsFailClosed(res) {
			t.Errorf("got %+v, %v", res, err)
		}
	})
	t.Run("malformed input", func(t *testing.T) {
		res, err := defaultP(t).Decide(context.Background(), &wire.Input{}, DecideOptions{})
		if err != nil || res.Decision != wire.Deny || !slices.Equal(reasonIDs(res.Reasons), []string{"avfs.deny.malformed_input"}) {
			t.Errorf("got %+v, %v", res, err)
		}
	})
}

// TestSandboxGrant: the decision's sandbox object becomes res.Sandbox; one
// avfs cannot read denies, and a deny grants nothing.
func TestSandboxGrant(t *testing.T) {
	tests := []struct {
		name     string
		decision string // the decision the policy gives
		reason   string // the decision of its one reason, test.r
		sandbox  string // Rego of the sandbox object, "" for none
		want     wire.Decision
		grant    wire.Network
		preview  bool
		invalid  string // part of the sandbox_invalid message, "" when valid
	}{
		{name: "preview", decision: "require_approval", reason: "require_approval", sandbox: `{"preview": true}`, want: wire.RequireApproval, preview: true},
		{name: "preview not a boolean", decision: "require_approval", reason: "require_approval", sandbox: `{"preview": "yes"}`, want: wire.Deny, invalid: `sandbox.preview is "yes", not a boolean`},
		{name: "absent", decision: "allow", reason: "allow", want: wire.Allow},
		{name: "empty", decision: "allow", reason: "allow", sandbox: `{}`, want: wire.Allow},
		{name: "host", decision: "require_approval", reason: "require_approval", sandbox: `{"network": "host"}`, want: wire.RequireApproval, grant: wire.NetworkHost},
		{name: "none", decision: "allow_with_checkpoint", reason: "allow", sandbox: `{"network": "none"}`, want: wire.AllowWithCheckpoint, grant: wire.NetworkNone},
		{name: "dropped on deny", decision: "deny", reason: "deny", sandbox: `{"network": "host"}`, want: wire.Deny},
		{name: "dropped when raised to deny", decision: "allow", reason: "deny", sandbox: `{"network": "host"}`, want: wire.Deny},
		{name: "not an object", decision: "allow", reason: "allow", sandbox: `"host"`, want: wire.Deny, invalid: `sandbox is "host", not an object`},
		{name: "null", decision: "allow", reason: "allow", sandbox: `null`, want: wire.Deny, invalid: "sandbox is missing or null, not an object"},
		{name: "array", decision: "allow", reason: "allow", sandbox: `[{"network": "host"}]`, want: wire.Deny, invalid: "not an object"},
		{name: "unknown key", decision: "require_approval", reason: "require_approval", sandbox: `{"network": "host", "mounts": ["/"]}`, want: wire.Deny, invalid: `unknown key "mounts" (known: network, preview)`},
		{name: "network not a string", decision: "allow", reason: "allow", sandbox: `{"network": true}`, want: wire.Deny, invalid: "sandbox.network is true, not one of host, none"},
		{name: "network null", decision: "allow", reason: "allow", sandbox: `{"network": null}`, want: wire.Deny, invalid: "sandbox.network is missing or null"},
		{name: "network unknown", decision: "allow", reason: "allow", sandbox: `{"network": "lan"}`, want: wire.Deny, invalid: `sandbox.network is "lan"`},
		{name: "network case", decision: "allow", reason: "allow", sandbox: `{"network": "HOST"}`, want: wire.Deny, invalid: `sandbox.network is "HOST"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sandbox := ""
			if tt.sandbox != "" {
				sandbox = ",\n\t\"sandbox\": " + tt.sandbox
			}
			src := "package avfs\n\ndecision := {\n\t\"decision\": \"" + tt.decision + "\",\n" +
				"\t\"reasons\": [{\"id\": \"test.r\", \"message\": \"m\", \"decision\": \"" + tt.reason + "\"}]" + sandbox + ",\n}\n"
			if err := os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := policyFor(t, bundles.Options{Paths: []string{dir}}).Decide(context.Background(), cmdInput("ls"), DecideOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision != tt.want || res.Sandbox.Network != tt.grant || res.Sandbox.Preview != tt.preview {
				t.Errorf("got %s %+v, want %s with network %q", res.Decision, res.Sandbox, tt.want, tt.grant)
			}
			if !slices.ContainsFunc(res.Reasons, func(r wire.Reason) bool { return r.ID == "test.r" }) {
				t.Errorf("the policy's reason is gone: %+v", res.Reasons)
			}
			i := slices.IndexFunc(res.Reasons, func(r wire.Reason) bool { return r.ID == ReasonSandboxInvalid })
			switch {
			case tt.invalid == "" && i >= 0:
				t.Errorf("unexpected %+v", res.Reasons[i])
			case tt.invalid != "" && i < 0:
				t.Errorf("no %s reason: %+v", ReasonSandboxInvalid, res.Reasons)
			case tt.invalid != "" && (res.Reasons[i].Decision != wire.Deny || !strings.Contains(res.Reasons[i].Message, tt.invalid) || res.Reasons[0].Decision != wire.Deny):
				t.Errorf("reasons %+v, want a deny mentioning %q first", res.Reasons, tt.invalid)
			}
			if IsFailClosed(res) {
				t.Errorf("an invalid sandbox object is not a policy that could not decide: %+v", res.Reasons)
			}
		})
	}
}

// TestRaised: a decision lower than one of its reasons is raised to it.
func TestRaised(t *testing.T) {
	p := policyFor(t, bundles.Options{Paths: []string{filepath.Join(testdata, "bundles", "lower")}})
	res, err := p.Decide(context.Background(), cmdInput("ls"), DecideOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != wire.Deny || !slices.Equal(reasonIDs(res.Reasons), []string{ReasonRaised, "test.deny"}) {
		t.Errorf("got %+v", res)
	}
}

func TestExplainModeUnknown(t *testing.T) {
	_, err := defaultP(t).Decide(context.Background(), cmdInput("ls"), DecideOptions{Explain: "everything"})
	if !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Errorf("err = %v, want invalid_input", err)
	}
}

// TestBrokenBundles: bundles that cannot be used are typed errors naming
// the bundle and, for Rego errors, the file and line.
func TestBrokenBundles(t *testing.T) {
	tests := []struct {
		path    string
		code    wire.Code
		file    string // suffix of the file detail, "" for none
		row     int
		message string
	}{
		{"broken/syntax", wire.CodeBundleInvalid, "broken/syntax/policy.rego", 5, "rego_parse_error"},
		{"broken/types", wire.CodeBundleInvalid, "broken/types/policy.rego", 4, "rego_type_error"},
		{"broken/noentry", wire.CodeBundleInvalid, "", 0, "no rule defines the entrypoint data.avfs.decision"},
		{"broken/baddata", wire.CodeBundleInvalid, "", 0, "data.json"},
		{"does-not-exist", wire.CodeBundleInvalid, "", 0, "does-not-exist"},
		{"cases/ls.json", wire.CodeBundleInvalid, "", 0, "gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			path := filepath.Join(testdata, tt.path)
			_, err := newPolicy(bundles.Options{Paths: []string{path}})
			if !wire.HasCode(err, tt.code) {
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("err = %v, want it to mention %q", err, tt.message)
			}
			details := wire.ErrorObject(err)
			if tt.file != "" {
				file, _ := details["file"].(string)
				if !strings.HasSuffix(file, tt.file) || details["row"] != tt.row {
					t.Errorf("details = %v, want file …%s row %d", details, tt.file, tt.row)
				}
				if !strings.Contains(err.Error(), tt.file) {
					t.Errorf("message %q does not name the file", err)
				}
			}
		})
	}
}

// TestExtensionBundles: a user bundle under data.extensions adds rules to
// the default policy, from a directory or from an `opa build` tarball.
func TestExtensionBundles(t *testing.T) {
	for _, path := range []string{"ext", "ext.tar.gz"} {
		t.Run(path, func(t *testing.T) {
			p := policyFor(t, bundles.Options{IncludeDefault: true, Paths: []string{filepath.Join(testdata, path)}})
			infos := p.Bundles()
			if len(infos) != 2 || infos[1].Revision != "acme-7" || !slices.Equal(infos[1].Roots, []string{"extensions/acme"}) {
				t.Fatalf("bundles = %+v", infos)
			}
			deploy := cmdInput("make", "deploy")
			res, _ := p.Decide(context.Background(), deploy, DecideOptions{})
			if res.Decision != wire.RequireApproval || !slices.Equal(reasonIDs(res.Reasons), []string{"acme.approval.deploy"}) {
				t.Errorf("make deploy: %+v", res)
			}
			rm := cmdInput("rm", "-r", "-f", "docs")
			rm.Paths = []wire.Path{{Arg: "docs", Path: "/docs", InsideVault: true, Source: "arg"}}
			res, _ = p.Decide(context.Background(), rm, DecideOptions{})
			if res.Decision != wire.Deny || res.Reasons[0].ID != "acme.deny.rm_outside_src" {
				t.Errorf("rm -rf docs: %+v", res)
			}
			rm.Paths[0].Path = "/src/old"
			res, _ = p.Decide(context.Background(), rm, DecideOptions{})
			if res.Decision != wire.AllowWithCheckpoint {
				t.Errorf("rm -rf src/old: %+v", res)
			}
		})
	}
}

func TestRoots(t *testing.T) {
	for _, path := range []string{"overlap", "nomanifest"} {
		t.Run(path, func(t *testing.T) {
			_, err := bundles.Load(context.Background(), bundles.Options{IncludeDefault: true, Paths: []string{filepath.Join(testdata, path)}})
			if !wire.HasCode(err, wire.CodeBundleInvalid) || !strings.Contains(err.Error(), "overlap") {
				t.Fatalf("err = %v, want overlapping roots", err)
			}
		})
	}
	// Without the default, the same bundle alone is fine to load.
	if _, err := bundles.Load(context.Background(), bundles.Options{Paths: []string{filepath.Join(testdata, "nomanifest")}}); err != nil {
		t.Error(err)
	}
	// Two extension bundles with different roots load together, a path given twice once.
	ext := filepath.Join(testdata, "ext")
	set, err := bundles.Load(context.Background(), bundles.Options{IncludeDefault: true, Paths: []string{ext, ext, filepath.Join(testdata, "overlap", "..", "ext")}})
	if err != nil || len(set.Bundles) != 2 {
		t.Fatalf("set %+v, %v", set, err)
	}
}

func TestHomePolicyDir(t *testing.T) {
	home := t.TempDir()
	opts := bundles.Options{IncludeDefault: true, HomePolicyDir: filepath.Join(home, "policy")}
	set, err := bundles.Load(context.Background(), opts)
	if err != nil || len(set.Bundles) != 1 {
		t.Fatalf("absent home policy dir: %+v, %v", set, err)
	}
	if err := os.CopyFS(filepath.Join(home, "policy"), os.DirFS(filepath.Join(testdata, "ext"))); err != nil {
		t.Fatal(err)
	}
	p := policyFor(t, opts)
	if b := p.Bundles(); len(b) != 2 || b[1].Name != filepath.Join(home, "policy") {
		t.Errorf("bundles = %+v", b)
	}
}

// tamperedDir is a copy of the signed directory bundle with a module
// changed after signing.
func tamperedDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tampered")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testdata, "ext-signed-dir"))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "acme.rego")
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Replace(src, []byte(`"deploy"`), []byte(`"deploy-nothing"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// signedTarball writes the ext bundle signed with signingKey (a PEM private
// key or an HMAC secret) and alg; tamper changes a module after signing.
func signedTarball(t *testing.T, signingKey, alg string, tamper bool) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(testdata, "ext", "acme.rego"))
	if err != nil {
		t.Fatal(err)
	}
	b := bundle.Bundle{
		Manifest: bundle.Manifest{Revision: "signed-1", Roots: &[]string{"extensions/acme"}},
		Data:     map[string]any{},
		Modules:  []bundle.ModuleFile{{URL: "/acme.rego", Path: "/acme.rego", Raw: src}},
	}
	if err := b.GenerateSignature(bundle.NewSigningConfig(signingKey, alg, ""), "default", false); err != nil {
		t.Fatal(err)
	}
	if tamper {
		b.Modules[0].Raw = bytes.Replace(src, []byte(`"deploy"`), []byte(`"deploy-nothing"`), 1)
	}
	path := filepath.Join(t.TempDir(), "signed.tar.gz")
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSignedBundles(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	priv, pub := ecKeys(t)
	_, otherPub := ecKeys(t)
	pubFile := writeFile("pub.pem", pub)
	otherFile := writeFile("other.pem", otherPub)
	secretFile := writeFile("secret", "s3cret-s3cret-s3cret-s3cret-s3cret")

	committedPub := filepath.Join(testdata, "keys", "es256.pub.pem")
	tests := []struct {
		name     string
		bundle   string
		key      string
		code     wire.Code // "" when it loads
		verified bool
	}{
		{"ecdsa good", signedTarball(t, priv, "ES256", false), pubFile, "", true},
		{"hmac good", signedTarball(t, "s3cret-s3cret-s3cret-s3cret-s3cret", "HS256", false), secretFile, "", true},
		{"hmac literal secret", signedTarball(t, "literal-secret", "HS512", false), "literal-secret", "", true},
		{"opa build --signing-key", filepath.Join(testdata, "ext-signed.tar.gz"), committedPub, "", true},
		{"opa sign --bundle . (a directory)", filepath.Join(testdata, "ext-signed-dir"), committedPub, "", true},
		{"signed directory, wrong key", filepath.Join(testdata, "ext-signed-dir"), otherFile, wire.CodeSignatureInvalid, false},
		{"signed directory, tampered", tamperedDir(t), committedPub, wire.CodeSignatureInvalid, false},
		{"wrong key", signedTarball(t, priv, "ES256", false), otherFile, wire.CodeSignatureInvalid, false},
		{"wrong secret", signedTarball(t, "one secret", "HS256", false), "another secret", wire.CodeSignatureInvalid, false},
		{"tampered", signedTarball(t, priv, "ES256", true), pubFile, wire.CodeSignatureInvalid, false},
		{"unsigned with key", filepath.Join(testdata, "ext.tar.gz"), pubFile, wire.CodeSignatureInvalid, false},
		{"unsigned dir with key", filepath.Join(testdata, "ext"), pubFile, wire.CodeSignatureInvalid, false},
		// The public key text used as an HMAC secret must not verify.
		{"alg confusion", signedTarball(t, pub, "HS256", false), pubFile, wire.CodeSignatureInvalid, false},
		{"signed without key", signedTarball(t, priv, "ES256", false), "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := bundles.Load(context.Background(), bundles.Options{IncludeDefault: true, Paths: []string{tt.bundle}, VerificationKey: tt.key})
			if tt.code != "" {
				if !wire.HasCode(err, tt.code) {
					t.Fatalf("err = %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := set.Bundles[1]
			if !b.Signed || b.Verified != tt.verified {
				t.Errorf("signed %v verified %v, want signed, verified %v", b.Signed, b.Verified, tt.verified)
			}
			if _, err := NewPolicy(context.Background(), set, PolicyOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
}

func ecKeys(t *testing.T) (priv, pub string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pb}))
}

// TestExplain: the trace is ours, with locations, and without compiler temporaries.
func TestExplain(t *testing.T) {
	traced := policyFor(t, bundles.Options{Paths: []string{filepath.Join(testdata, "bundles", "traced")}})
	res, err := traced.Decide(context.Background(), cmdInput("ls"), DecideOptions{Explain: ExplainNotes})
	if err != nil {
		t.Fatal(err)
	}
	var notes []wire.TraceEvent
	for _, ev := range res.Trace {
		if ev.Op == "note" {
			notes = append(notes, ev)
		}
	}
	if len(notes) != 1 || notes[0].Message != "program is ls" || notes[0].Location == nil ||
		!strings.HasSuffix(notes[0].Location.File, "traced/policy.rego") || notes[0].Location.Row != 5 {
		t.Fatalf("notes = %+v", notes)
	}
	if res.Trace[0].Op != "enter" || res.Trace[0].Depth != 1 {
		t.Errorf("a note comes with the queries leading to it: %+v", res.Trace[0])
	}

	ls := readCase(t, "pipeline_read_only")
	rm := readCase(t, "rm_rf")
	for _, mode := range []string{ExplainFails, ExplainFull} {
		t.Run(mode, func(t *testing.T) {
			for _, in := range []*wire.Input{&ls.Input, &rm.Input} {
				res, err := defaultP(t).Decide(context.Background(), in, DecideOptions{Explain: mode})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Trace) == 0 {
					t.Fatal("no trace")
				}
				ops := map[string]bool{}
				rules := map[string]bool{}
				for _, ev := range res.Trace {
					ops[ev.Op] = true
					if ev.Rule != "" {
						rules[ev.Rule] = true
					}
					if ev.Depth < 1 {
						t.Errorf("depth %d: %+v", ev.Depth, ev)
					}
					if strings.Contains(ev.Query, "__local") || strings.Contains(ev.Query, "_term_") {
						t.Errorf("compiler temporary in %q", ev.Query)
					}
					for k, v := range ev.Locals {
						if strings.Contains(k, "__local") || strings.Contains(v, "__local") {
							t.Errorf("compiler temporary in locals %v", ev.Locals)
						}
					}
					if ev.Location != nil && ev.Location.File != "" && !strings.HasPrefix(ev.Location.File, "policies/") {
						t.Errorf("location %+v outside policies/", ev.Location)
					}
				}
				if !ops["fail"] {
					t.Errorf("%s: no fail event", mode)
				}
				if mode == ExplainFull && (!ops["enter"] || !ops["exit"] || !ops["eval"] || !rules["data.avfs.decision"]) {
					t.Errorf("full trace lacks steps: ops %v rules %v", ops, rules)
				}
				if mode == ExplainFails {
					for _, ev := range res.Trace {
						if ev.Op != "fail" && ev.Op != "enter" && ev.Op != "redo" {
							t.Errorf("fails mode kept a %s event", ev.Op)
							break
						}
					}
				}
				if in == &ls.Input && res.Decision != wire.Allow {
					t.Errorf("tracing changed the decision: %+v", res)
				}
			}
		})
	}
}

// TestDecideConcurrent: one Policy serves many goroutines (run with -race).
func TestDecideConcurrent(t *testing.T) {
	p := defaultP(t)
	names := []string{"ls", "rm_rf", "curl_pipe_sh", "npm_install_in_sh_c"}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := readCase(t, names[i%len(names)])
			for range 20 {
				res, err := p.Decide(context.Background(), &c.Input, DecideOptions{})
				if err != nil || res.Decision != c.Want.Decision {
					t.Errorf("%s: %v %v", names[i%len(names)], res.Decision, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkDecide(b *testing.B) {
	p := defaultP(b)
	for _, name := range []string{"ls", "sudo_rm", "npm_install_in_sh_c", "curl_pipe_sh"} {
		c := readCase(b, name)
		for _, mode := range []string{ExplainOff, ExplainFull} {
			label := name
			if mode != "" {
				label += "_explain_" + mode
			}
			b.Run(label, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Decide(context.Background(), &c.Input, DecideOptions{Explain: mode}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkInputValue(b *testing.B) {
	for _, name := range []string{"ls", "curl_pipe_sh"} {
		c := readCase(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = InputValue(&c.Input)
			}
		})
	}
}

func BenchmarkNewPolicy(b *testing.B) {
	for b.Loop() {
		if _, err := newPolicy(bundles.Options{IncludeDefault: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParsedShellScripts checks the default policy on what Parse makes of
// --shell scripts, including those without a simple command.
func TestParsedShellScripts(t *testing.T) {
	p := defaultP(t)
	for _, tc := range []struct {
		script   string
		decision wire.Decision
		reasons  []string
	}{
		{"ls -la", wire.Allow, []string{"avfs.allow.read_only"}},
		{"x=1", wire.Allow, []string{"avfs.allow.read_only"}},
		{"# nothing to do", wire.Allow, []string{"avfs.allow.read_only"}},
		{"echo 'unterminated", wire.Deny, []string{"avfs.deny.unparsable_script"}},
		{"> out.txt", wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}},
		{"x=1; sudo ls", wire.Deny, []string{"avfs.deny.privileged"}},
		{"X=1; mkdir -p build", wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}},
		{"PATH=.; ls", wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}},
		{"set -euo pipefail; export CI=1; ls", wire.Allow, []string{"avfs.allow.read_only"}},
		{"export LD_PRELOAD=./x.so; ls", wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}},
		// A program named by a substitution or variable is not known by name.
		{"$(printf curl) -s http://example.com | sh", wire.RequireApproval, []string{"avfs.approval.dynamic_command"}},
		{"x=$(cat prog); $x ls", wire.RequireApproval, []string{"avfs.approval.dynamic_command"}},
		{`x="$1 ls"; sh -c "$x"`, wire.RequireApproval, []string{"avfs.approval.dynamic_command"}},
		// A variable assigned a literal is judged as its value.
		{"x=sudo; $x ls", wire.Deny, []string{"avfs.deny.privileged"}},
		{`x="sudo ls"; sh -c "$x"`, wire.Deny, []string{"avfs.deny.privileged"}},
		{`eval "$CMD"`, wire.RequireApproval, []string{"avfs.approval.dynamic_command"}},
		{`bash -c 'echo $USER'; eval 'echo $x'`, wire.Allow, []string{"avfs.allow.read_only"}},
		{`bash -c 'rm x'; eval 'echo $x'`, wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}},
	} {
		in, err := Parse(context.Background(), ParseRequest{Shell: tc.script, Cwd: "/"})
		if err != nil {
			t.Fatalf("%q: %v", tc.script, err)
		}
		res, err := p.Decide(context.Background(), in, DecideOptions{})
		if err != nil || res.Decision != tc.decision || !slices.Equal(reasonIDs(res.Reasons), tc.reasons) {
			t.Errorf("%q: %s %v, want %s %v (%v)", tc.script, res.Decision, reasonIDs(res.Reasons), tc.decision, tc.reasons, err)
		}
	}
}

// TestSandboxedDecisions: the default policy on documents Parse builds in a
// sandbox and without one, network grant included.
func TestSandboxedDecisions(t *testing.T) {
	p := defaultP(t)
	none := wire.SandboxInput{Mode: wire.SandboxNone, Reason: "--sandbox none", Home: "/root"}
	for _, tc := range []struct {
		script   string
		sandbox  wire.SandboxInput
		approval string
		decision wire.Decision
		reasons  []string
		network  wire.Network
	}{
		{"cat /etc/passwd", nsSandbox("/root"), "", wire.Allow, []string{"avfs.allow.read_only"}, wire.NetworkNone},
		{"cat /etc/passwd", none, "", wire.Deny, []string{"avfs.deny.outside_vault"}, ""},
		{"cat ~/.gitconfig /workspace/src/a", nsSandbox("/root"), "", wire.Allow, []string{"avfs.allow.read_only"}, wire.NetworkNone},
		{"cat ~/.gitconfig", none, "", wire.Deny, []string{"avfs.deny.outside_vault"}, ""},
		{"echo hi > /tmp/x; cat /tmp/x", nsSandbox("/root"), "", wire.Allow, []string{"avfs.allow.read_only"}, wire.NetworkNone},
		{"echo hi > /tmp/x", none, "", wire.Deny, []string{"avfs.deny.outside_vault"}, ""},
		{"ls 2>/dev/null", none, "", wire.Allow, []string{"avfs.allow.read_only"}, wire.NetworkNone},
		{"cd /usr/lib && rm -rf python3", nsSandbox("/root"), "", wire.Deny, []string{"avfs.deny.read_only_system"}, ""},
		{"echo x >> /etc/hosts", nsSandbox("/root"), "", wire.Deny, []string{"avfs.deny.read_only_system"}, ""},
		{"cat /var/log/syslog", nsSandbox("/root"), "", wire.Deny, []string{"avfs.deny.outside_vault"}, ""},
		{"curl -o /tmp/f https://example.com", nsSandbox("/root"), "ap-1", wire.RequireApproval, []string{"avfs.approval.network", "avfs.sandbox.network_host"}, wire.NetworkHost},
		{"curl https://example.com", nsSandbox("/root"), "", wire.RequireApproval, []string{"avfs.approval.network"}, wire.NetworkNone},
		{"eval \"$CMD\"", nsSandbox("/root"), "ap-1", wire.RequireApproval, []string{"avfs.approval.dynamic_command"}, wire.NetworkNone},
	} {
		in, err := Parse(context.Background(), ParseRequest{Shell: tc.script, Cwd: "/", PathEnv: "/nonexistent",
			Sandbox: tc.sandbox, Request: wire.RequestInput{ApprovalID: tc.approval}})
		if err != nil {
			t.Fatalf("%q: %v", tc.script, err)
		}
		res, err := p.Decide(context.Background(), in, DecideOptions{})
		if err != nil || res.Decision != tc.decision || !slices.Equal(reasonIDs(res.Reasons), tc.reasons) || res.Sandbox.Network != tc.network {
			t.Errorf("%q (%s): %s %v %+v, want %s %v network %q (%v)", tc.script, tc.sandbox.Mode, res.Decision, reasonIDs(res.Reasons), res.Sandbox, tc.decision, tc.reasons, tc.network, err)
		}
	}
}

// TestCountExpressions: the default policy evaluates expressions for every
// decision, more for a longer script, the same number each time.
func TestCountExpressions(t *testing.T) {
	p := defaultP(t)
	ctx := context.Background()
	var scripts []string
	for _, n := range []int{1, 2, 5, 20} {
		cmds := make([]string, n)
		for i := range cmds {
			cmds[i] = fmt.Sprintf("grep -rn TODO src/d%d", i)
		}
		scripts = append(scripts, strings.Join(cmds, "; "))
	}
	last := 0
	for _, script := range scripts {
		in, err := Parse(ctx, ParseRequest{Shell: script, Cwd: "/", PathEnv: "/nonexistent"})
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		n, err := p.CountExpressions(ctx, in)
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		if again, _ := p.CountExpressions(ctx, in); again != n {
			t.Errorf("%q: %d expressions, then %d", script, n, again)
		}
		t.Logf("%d commands: %d expressions", len(in.Commands), n)
		if n <= last {
			t.Errorf("%q: %d expressions, not more than %d for a shorter script", script, n, last)
		}
		last = n
	}
	if n, err := p.CountExpressions(ctx, nil); n != 0 || wire.CodeOf(err) != wire.CodeInvalidInput {
		t.Errorf("nil input: %d, %v; want 0 and invalid_input", n, err)
	}
}

// TestUnavailablePolicy: a policy made with NewUnavailablePolicy denies
// every decision, effects included, with ReasonPolicyUnavailable and why,
// and grants nothing.
func TestUnavailablePolicy(t *testing.T) {
	infos := []wire.BundleInfo{{Name: "remote", Roots: []string{"extensions/remote"}}}
	tests := []struct {
		name, why, want string
	}{
		{"with a reason", "bundle remote was never activated", "bundle remote was never activated"},
		{"without one", "", "has not been loaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewUnavailablePolicy(tt.why, infos)
			if p.Unavailable() == "" || p.HasEffects() || p.Programs() != nil {
				t.Fatalf("Unavailable %q, HasEffects %v, Programs %v", p.Unavailable(), p.HasEffects(), p.Programs())
			}
			res, err := p.Decide(context.Background(), cmdInput("ls"), DecideOptions{Explain: ExplainFull})
			if err != nil {
				t.Fatal(err)
			}
			eff, err := p.DecideEffects(context.Background(), &wire.EffectsInput{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []wire.PolicyResult{res, eff} {
				if r.Decision != wire.Deny || !IsFailClosed(r) || len(r.Reasons) != 1 || r.Sandbox != (wire.SandboxGrant{}) {
					t.Fatalf("got %+v, want a deny with one reason", r)
				}
				if got := r.Reasons[0]; got.ID != ReasonPolicyUnavailable || !strings.Contains(got.Message, tt.want) {
					t.Errorf("reason %+v, want %s mentioning %q", got, ReasonPolicyUnavailable, tt.want)
				}
				if !slices.EqualFunc(r.Bundles, infos, func(a, b wire.BundleInfo) bool { return a.Name == b.Name }) {
					t.Errorf("bundles %+v, want %+v", r.Bundles, infos)
				}
			}
		})
	}
	if NewUnavailablePolicy("x", nil).Unavailable() == "" || defaultP(t).Unavailable() != "" {
		t.Error("Unavailable tells the policies apart wrongly")
	}
}
