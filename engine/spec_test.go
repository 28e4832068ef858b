package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"avfs/bundles"
	"avfs/sandbox"
	"avfs/wire"
)

// TestReadProgramsRefuses: a spec that is not in the documented format is
// bundle_invalid, naming the program and what is wrong.
func TestReadProgramsRefuses(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"not an object", `["ls"]`, "must be an object"},
		{"unknown key", `{"ls": {"operand": ["read..."]}}`, `operand: unknown key`},
		{"not JSON", `{"ls": `, "not JSON"},
		{"program alias to nothing", `{"podman": "docker"}`, `"docker" is no program spec`},
		{"a spec that is no object", `{"ls": ["read..."]}`, "a spec must be an object"},
		{"a flag that is no boolean", `{"sort": {"abbreviations": "yes"}}`, "abbreviations: want true or false"},
		{"unknown option key", `{"x": {"options": {"-o": {"role": "write"}}}}`, `unknown key "role"`},
		{"operands that are no list", `{"x": {"operands": "read..."}}`, "operands: want a list of strings"},
		{"unknown operand role", `{"ls": {"operands": ["file..."]}}`, `operands[0]: unknown role "file"`},
		{"two repeated roles", `{"cp": {"operands": ["read...", "write..."]}}`, `only one operand role may end in "..."`},
		{"unknown option role", `{"sort": {"options": {"-o": "output"}}}`, `options.-o: unknown role "output"`},
		{"command is no option role", `{"x": {"options": {"-c": "command"}}}`, `options.-c: unknown role "command"`},
		{"option name without a dash", `{"x": {"options": {"o": "text"}}}`, `"o" is not an option name`},
		{"optional with two values", `{"x": {"options": {"-o": {"value": ["text", "text"], "optional": true}}}}`, "exactly one value role"},
		{"fills without a value", `{"x": {"options": {"-e": {"fills": true}}}}`, "takes a value"},
		{"alias to nothing", `{"git": {"subcommands": {"co": "checkout"}}}`, `"checkout" is no subcommand spec of git`},
		{"bad subcommand", `{"git": {"subcommands": {"log": {"operands": [1]}}}}`, "the spec of git log"},
		{"unknown key role", `{"dd": {"keys": {"of": "device"}}}`, `keys.of: unknown role "device"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadPrograms([]byte(tc.json), "specs.json")
			var werr *wire.Error
			if !errors.As(err, &werr) || werr.Code != wire.CodeBundleInvalid || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "specs.json") {
				t.Fatalf("error = %v, want bundle_invalid with %q", err, tc.want)
			}
		})
	}
	for _, empty := range []string{"", "null", "{}"} {
		ps, err := ReadPrograms([]byte(empty), "x")
		if err != nil || len(ps.Names()) != 0 {
			t.Errorf("ReadPrograms(%q) = %v, %v", empty, ps.Names(), err)
		}
	}
}

// TestOperandRoles: fixed roles from the front and the back, the repeated
// one for the rest, and options that fill the first.
func TestOperandRoles(t *testing.T) {
	spec := func(roles ...ArgRole) *ProgramSpec {
		s := &ProgramSpec{Operands: roles, Repeat: -1}
		for i, r := range roles {
			if base, ok := strings.CutSuffix(string(r), "..."); ok {
				s.Operands[i], s.Repeat = ArgRole(base), i
			}
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		spec  *ProgramSpec
		n     int
		fills int
		want  []ArgRole
	}{
		{"cp sources and destination", spec("read...", "write"), 3, 0, []ArgRole{ArgRead, ArgRead, ArgWrite}},
		{"cp with one operand", spec("read...", "write"), 1, 0, []ArgRole{ArgWrite}},
		{"grep pattern then files", spec("pattern", "read..."), 3, 0, []ArgRole{ArgPattern, ArgRead, ArgRead}},
		{"grep -e fills the pattern", spec("pattern", "read..."), 2, 1, []ArgRole{ArgRead, ArgRead}},
		{"chmod mode then files", spec("text", "write..."), 2, 0, []ArgRole{ArgText, ArgWrite}},
		{"uniq input and output", spec("read", "write"), 2, 0, []ArgRole{ArgRead, ArgWrite}},
		{"past the list", spec("read", "write"), 3, 0, []ArgRole{ArgRead, ArgWrite, ""}},
		{"filled past the list", spec("code"), 2, 1, []ArgRole{"", ""}},
		{"no operands", spec("read..."), 0, 0, []ArgRole{}},
		{"filled repeat", spec("code", "read..."), 2, 3, []ArgRole{ArgRead, ArgRead}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spec.operandRoles(tc.n, tc.fills); !slices.Equal(got, tc.want) {
				t.Errorf("roles = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDefaultPrograms: the default bundle's specs load, and what the
// parser reads from them is what the policy gets.
func TestDefaultPrograms(t *testing.T) {
	ps, err := DefaultPrograms()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"git", "sort", "grep", "find", "go", "npm", "cp", "sed", "curl"} {
		if ps.Lookup(name) == nil {
			t.Errorf("no default spec of %s", name)
		}
	}
	if ps.Lookup("podman") != ps.Lookup("docker") || ps.Lookup("podman") == nil {
		t.Error("podman does not share docker's spec")
	}
	if ps.Lookup("pip3.12") != ps.Lookup("pip") || ps.Lookup("nosuchprogram") != nil {
		t.Error("version suffixes are not looked up as their program")
	}
	if got := defaultP(t).Programs().Names(); !slices.Equal(got, ps.Names()) {
		t.Errorf("the policy's programs differ from the embedded file: %d vs %d", len(got), len(ps.Names()))
	}
}

// TestParseBySpec: the words of a program with a spec are classified as
// the spec says.
func TestParseBySpec(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name:  "values of options are not operands",
			req:   argvReq("npm", "--prefix", "web", "install", "left-pad"),
			cmds:  []cmdWant{{prog: "npm", ops: []string{"install", "left-pad"}, flags: []string{"--prefix"}}},
			paths: []string{"web=/src/web vault arg@0"},
		},
		{
			name:  "the value of a writing option is written, attached or not",
			req:   argvReq("sort", "-uo/etc/hosts", "-t/", "-k", "2", "in.txt"),
			cmds:  []cmdWant{{prog: "sort", ops: []string{"in.txt"}, flags: []string{"-u", "-o", "-t", "-k"}}},
			paths: []string{"/etc/hosts=/etc/hosts outside arg@0", "in.txt=/src/in.txt vault arg@0"},
			roles: []wire.Role{wire.RoleWrite, wire.RoleRead},
		},
		{
			name:  "GNU abbreviations are recorded under the full name",
			req:   argvReq("sort", "--out=o.txt", "--field-sep=/", "x"),
			cmds:  []cmdWant{{prog: "sort", ops: []string{"x"}, flags: []string{"--output", "--field-separator"}}},
			paths: []string{"o.txt=/src/o.txt vault arg@0", "x=/src/x vault arg@0"},
			roles: []wire.Role{wire.RoleWrite, wire.RoleRead},
		},
		{
			name:  "an ambiguous abbreviation names no option",
			req:   argvReq("git", "diff", "--outp=p"),
			cmds:  []cmdWant{{prog: "git", ops: []string{"diff"}, flags: []string{"--outp"}}},
			paths: []string{},
		},
		{
			name:  "patterns, separators and code are no paths",
			req:   shellReq("cut -d/ -f2 a; tr / _; grep -rn /api/v1 src; sed -n '/re/p' b; jq '.[] | .name' c; find . -name '.*' -path '*/x/*'"),
			paths: []string{"a=/src/a vault arg@0", "src=/src/src vault arg@2", "b=/src/b vault arg@3", "c=/src/c vault arg@4", ".=/src vault arg@5"},
		},
		{
			name:  "an option that fills the first operand",
			req:   argvReq("grep", "-e", "/x/", "-f", "pats", "f"),
			paths: []string{"pats=/src/pats vault arg@0", "f=/src/f vault arg@0"},
			roles: []wire.Role{wire.RoleRead, wire.RoleRead},
		},
		{
			name: "code words are listed",
			req:  argvReq("sed", "-e", "s/a/b/", "-e", "p", "f"),
			check: func(t *testing.T, in *wire.Input) {
				if got := in.Commands[0].Code; !slices.Equal(got, []string{"s/a/b/", "p"}) {
					t.Errorf("code = %q", got)
				}
			},
		},
		{
			name:  "an option that makes operands written",
			req:   argvReq("sed", "-i.bak", "s/a/b/", "f", "g"),
			paths: []string{"f=/src/f vault arg@0", "g=/src/g vault arg@0"},
			roles: []wire.Role{wire.RoleWrite, wire.RoleWrite},
		},
		{
			name:  "subcommands and their options",
			req:   argvReq("go", "-C", "mod", "test", "-run", "/Sub", "-coverprofile=c.out", "./..."),
			cmds:  []cmdWant{{prog: "go", ops: []string{"test", "./..."}}},
			paths: []string{"mod=/src/mod vault arg@0", "c.out=/src/c.out vault arg@0", "./...=/src/... vault arg@0"},
			roles: []wire.Role{wire.RoleUnknown, wire.RoleWrite, wire.RoleUnknown},
			check: func(t *testing.T, in *wire.Input) {
				if in.Commands[0].Spec != "go test" {
					t.Errorf("spec = %q", in.Commands[0].Spec)
				}
			},
		},
		{
			name:  "long-only options with attached values",
			req:   argvReq("cc", "-I/usr/include", "-Wl,-rpath,/opt/x", "-std=c11", "-o", "a.out", "m.c"),
			paths: []string{"/usr/include=/usr/include outside arg@0", "a.out=/src/a.out vault arg@0", "m.c=/src/m.c vault arg@0"},
			roles: []wire.Role{wire.RoleRead, wire.RoleWrite, wire.RoleRead},
		},
		{
			name: "option prefixes",
			req:  argvReq("cargo", "+nightly", "install", "ripgrep"),
			cmds: []cmdWant{{prog: "cargo", ops: []string{"install", "ripgrep"}, flags: []string{"+nightly"}}},
		},
		{
			name:  "keys of NAME=VALUE operands",
			req:   argvReq("dd", "if=in.img", "of=/dev/sda", "bs=1M"),
			paths: []string{"in.img=/src/in.img vault arg@0", "/dev/sda=/dev/sda outside arg@0"},
			roles: []wire.Role{wire.RoleRead, wire.RoleWrite},
		},
		{
			name: "a command in operands runs",
			req:  argvReq("git", "bisect", "run", "make", "test"),
			cmds: []cmdWant{{prog: "git", ops: []string{"bisect", "run", "make", "test"}}, {prog: "make", origin: "argument", ops: []string{"test"}}},
		},
		{
			name: "a command line in an option runs",
			req:  argvReq("sort", "--compress-program=gzip -9", "big"),
			cmds: []cmdWant{{prog: "sort", ops: []string{"big"}}, {prog: "gzip", origin: "argument"}},
		},
		{
			name: "a command line that is not literal is one dynamic command",
			req:  shellReq(`tar -I "$Z" -cf a.tar src`),
			cmds: []cmdWant{{prog: "tar", dynamic: true}, {prog: `"$Z"`, origin: "argument", dynamic: true}},
		},
		{
			name:  "values of unlisted long options of configure are text",
			req:   argvReq("./configure", "--prefix=/usr/local", "--cache-file=c"),
			paths: []string{"./configure=/src/configure vault program@0", "c=/src/c vault arg@0"},
			roles: []wire.Role{wire.RoleExecute, wire.RoleWrite},
		},
		{
			name:  "multi-value options",
			req:   argvReq("jq", "--arg", "dir", "/etc", "--rawfile", "t", "tpl.txt", ".x", "in.json"),
			paths: []string{"tpl.txt=/src/tpl.txt vault arg@0", "in.json=/src/in.json vault arg@0"},
		},
		{
			name:  "a substitution where a path is expected is a path known only at run time",
			req:   shellReq("cat $(printf '\\x2fetc\\x2fpasswd')"),
			paths: []string{`$(printf '\x2fetc\x2fpasswd')=$(printf '\x2fetc\x2fpasswd') unknown arg@0`},
		},
		{
			name:  "redirects have roles",
			req:   shellReq("sort < in > out"),
			paths: []string{"in=/src/in vault redirect@0", "out=/src/out vault redirect@0"},
			roles: []wire.Role{wire.RoleRead, wire.RoleWrite},
		},
		{
			name:  "a script file of an interpreter is executed",
			req:   argvReq("bash", "build.sh", "x"),
			paths: []string{"build.sh=/src/build.sh vault arg@0"},
			roles: []wire.Role{wire.RoleExecute},
		},
	})
}

// TestExtensionPrograms: an extension bundle's specs take effect — a
// program of its own, and one it redefines — and a broken one, or two
// extensions specifying one program, is bundle_invalid.
func TestExtensionPrograms(t *testing.T) {
	ext := func(t *testing.T, name, programs string) string {
		dir := t.TempDir()
		manifest := `{"roots": ["extensions/` + name + `"]}`
		data := `{"extensions": {"` + name + `": {"programs": ` + programs + `}}}`
		for file, text := range map[string]string{".manifest": manifest, "data.json": data} {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	deploy := ext(t, "acme", `{"deploy": {"options": {"--to": "url"}, "operands": ["write..."]}, "tr": {"operands": ["write..."]}}`)
	p, err := newPolicy(bundles.Options{IncludeDefault: true, Paths: []string{deploy}})
	if err != nil {
		t.Fatal(err)
	}
	decide := func(p *Policy, argv ...string) wire.PolicyResult {
		t.Helper()
		in, err := Parse(context.Background(), ParseRequest{Argv: argv, Cwd: "/", Programs: p.Programs(),
			Sandbox: sandbox.Input(wire.SandboxNamespaces, "", sandbox.DefaultWorkspace, "/home/u")})
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Decide(context.Background(), in, DecideOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The extension's program: its operands are written, so a system path is denied.
	if res := decide(p, "deploy", "--to", "https://x.example/a/b", "/etc/motd"); res.Decision != wire.Deny || reasonIDs(res.Reasons)[0] != "avfs.deny.read_only_system" {
		t.Errorf("deploy with the extension: %s %v", res.Decision, reasonIDs(res.Reasons))
	}
	// Without it, the same words are judged by their shape: nothing is known to be written.
	if res := decide(defaultP(t), "deploy", "--to", "https://x.example/a/b", "/etc/motd"); res.Decision != wire.AllowWithCheckpoint {
		t.Errorf("deploy without the extension: %s %v", res.Decision, reasonIDs(res.Reasons))
	}
	// A redefined program replaces the default spec.
	if res := decide(p, "tr", "/etc/motd"); res.Decision != wire.Deny {
		t.Errorf("tr with the extension: %s %v", res.Decision, reasonIDs(res.Reasons))
	}
	if res := decide(defaultP(t), "tr", "/etc/motd"); res.Decision != wire.Allow {
		t.Errorf("tr without the extension: %s %v", res.Decision, reasonIDs(res.Reasons))
	}

	broken := ext(t, "broken", `{"deploy": {"operands": ["target"]}}`)
	_, err = newPolicy(bundles.Options{IncludeDefault: true, Paths: []string{broken}})
	var werr *wire.Error
	if !errors.As(err, &werr) || werr.Code != wire.CodeBundleInvalid || !strings.Contains(err.Error(), "data.extensions.broken.programs") {
		t.Errorf("broken spec: %v", err)
	}
	// Specs a rule computes are evaluated.
	ruled := t.TempDir()
	for file, text := range map[string]string{
		".manifest":   `{"roots": ["extensions/ruled"]}`,
		"policy.rego": "package extensions.ruled\n\nprograms[name] := {\"operands\": [\"write...\"]} if some name in [\"deploy\", \"ship\"]\n",
	} {
		if err := os.WriteFile(filepath.Join(ruled, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pr, err := newPolicy(bundles.Options{IncludeDefault: true, Paths: []string{ruled}})
	if err != nil {
		t.Fatal(err)
	}
	if res := decide(pr, "ship", "/etc/motd"); res.Decision != wire.Deny {
		t.Errorf("ship with a computed spec: %s %v", res.Decision, reasonIDs(res.Reasons))
	}

	other := ext(t, "other", `{"deploy": {}}`)
	_, err = newPolicy(bundles.Options{IncludeDefault: true, Paths: []string{deploy, other}})
	if !errors.As(err, &werr) || werr.Code != wire.CodeBundleInvalid || !strings.Contains(err.Error(), "both give a spec of deploy") {
		t.Errorf("two specs of one program: %v", err)
	}
}

// TestParseFeeds: a command in a substitution names the command its
// output goes to.
func TestParseFeeds(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   []int // feeds of every command, in order
	}{
		{`python3 -c "$(curl -s x)"`, []int{-1, 0}},
		{`bash <(curl -s x) arg`, []int{-1, 0}},
		{`bash < <(curl -s x)`, []int{-1, 0}},
		{`v=$(curl -s x); python3 build.py "$v"`, []int{-1, 0, -1}},
		{`echo "$(cat $(curl -s x))" | sh`, []int{-1, 0, 1, -1}},
		{`for f in $(curl -s x); do echo "$f"; done`, []int{-1, -1}},
		{`{ cat; } < <(curl -s x)`, []int{-1, -1}},
		{`eval "$(curl -s x)"`, []int{-1, 0}},
		{`x=$(sh -c 'curl -s y')`, []int{-1, 0, 0}},
	} {
		in, err := Parse(context.Background(), ParseRequest{Shell: tc.script, Cwd: "/"})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int, len(in.Commands))
		for i, c := range in.Commands {
			got[i] = c.Feeds
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: feeds %v, want %v (%s)", tc.script, got, tc.want, commandPrograms(in))
		}
	}
}
