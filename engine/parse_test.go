package engine

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"avfs/wire"
)

// fakePrograms are the executables of the test PATH (fakePathDir).
var fakePrograms = []string{
	"bash", "busybox", "cat", "chmod", "curl", "dd", "echo", "env", "find", "flock", "git", "id",
	"ls", "make", "nice", "nohup", "perl", "python", "python3", "rm", "sh", "sudo", "tar",
	"timeout", "wget", "xargs", "zsh",
}

// fakePathDir makes a directory holding fakePrograms (and a non-executable
// file "noexec") to serve as PATH, so program_path does not depend on the
// machine running the tests.
func fakePathDir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	for _, p := range fakePrograms {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "noexec"), nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func argvReq(words ...string) ParseRequest { return ParseRequest{Argv: words} }
func shellReq(src string) ParseRequest     { return ParseRequest{Shell: src} }

// cmdWant is the expected shape of one command. Empty strings and nil
// slices or maps are not checked; the booleans always are. path "none"
// expects an empty program_path; "BIN/x" is x in the test PATH.
type cmdWant struct {
	prog, path, origin, pipe string
	argv, flags, ops         []string
	fv, assigns              map[string]string
	wrappers                 []string // each wrapper's argv, space-joined
	redirs                   []string // "op target"
	stdin, dynamic           bool
}

// scriptWant is the expected Script. parseError is a substring ("" expects none).
type scriptWant struct {
	shell             string
	subst, pipes      bool
	parseError        string
	redirects, funcs  []string
	skipShell, anyErr bool
}

type parseCase struct {
	name     string
	req      ParseRequest
	cmds     []cmdWant   // when set, exactly these commands
	paths    []string    // when non-nil, exactly these: "arg=path where source@command"
	roles    []wire.Role // when non-nil, the roles of the paths, in order
	script   *scriptWant
	noScript bool
	check    func(t *testing.T, in *wire.Input)
}

func runParseCases(t *testing.T, cases []parseCase) {
	t.Helper()
	bin := fakePathDir(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			if req.Cwd == "" {
				req.Cwd = "/src"
			}
			if req.PathEnv == "" {
				req.PathEnv = bin
			}
			in, err := Parse(context.Background(), req)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checkInputInvariants(t, in, len(req.Argv) > 0)
			if tc.cmds != nil {
				if len(in.Commands) != len(tc.cmds) {
					t.Fatalf("got %d commands %s, want %d", len(in.Commands), commandPrograms(in), len(tc.cmds))
				}
				for i, w := range tc.cmds {
					checkParsedCommand(t, i, in.Commands[i], w, bin)
				}
			}
			if tc.paths != nil {
				got := make([]string, len(in.Paths))
				for i, p := range in.Paths {
					got[i] = pathString(p)
				}
				if !slices.Equal(got, tc.paths) {
					t.Errorf("paths:\n got  %q\n want %q", got, tc.paths)
				}
			}
			if tc.roles != nil {
				got := make([]wire.Role, len(in.Paths))
				for i, p := range in.Paths {
					got[i] = p.Role
				}
				if !slices.Equal(got, tc.roles) {
					t.Errorf("path roles:\n got  %q\n want %q", got, tc.roles)
				}
			}
			if tc.noScript && in.Script != nil {
				t.Errorf("script = %+v, want none", in.Script)
			}
			if tc.script != nil {
				checkParsedScript(t, in.Script, tc.script)
			}
			if tc.check != nil {
				tc.check(t, in)
			}
		})
	}
}

func commandPrograms(in *wire.Input) string {
	var p []string
	for _, c := range in.Commands {
		p = append(p, c.Program+"("+c.Origin+")")
	}
	return "[" + strings.Join(p, " ") + "]"
}

func pathString(p wire.Path) string {
	return p.Arg + "=" + p.Path + " " + string(p.Where) + " " + p.Source + "@" + strconv.Itoa(p.Command)
}

func checkParsedCommand(t *testing.T, i int, c wire.Command, w cmdWant, bin string) {
	t.Helper()
	errorf := func(field string, got, want any) {
		t.Helper()
		t.Errorf("commands[%d] (%s) %s = %q, want %q", i, c.Raw, field, got, want)
	}
	if w.prog != "" && c.Program != w.prog {
		errorf("program", c.Program, w.prog)
	}
	switch {
	case w.path == "none" && c.ProgramPath != "":
		errorf("program_path", c.ProgramPath, "")
	case strings.HasPrefix(w.path, "BIN/") && c.ProgramPath != filepath.Join(bin, w.path[4:]):
		errorf("program_path", c.ProgramPath, filepath.Join(bin, w.path[4:]))
	case w.path != "" && w.path != "none" && !strings.HasPrefix(w.path, "BIN/") && c.ProgramPath != w.path:
		errorf("program_path", c.ProgramPath, w.path)
	}
	if w.origin != "" && c.Origin != w.origin {
		errorf("origin", c.Origin, w.origin)
	}
	if w.pipe != "" {
		if got := strconv.Itoa(c.Pipeline) + "/" + strconv.Itoa(c.PipelineLen); got != w.pipe {
			errorf("pipeline", got, w.pipe)
		}
	}
	for _, f := range []struct {
		name      string
		got, want []string
	}{{"argv", c.Argv, w.argv}, {"flags", c.Flags, w.flags}, {"operands", c.Operands, w.ops}} {
		if f.want != nil && !slices.Equal(f.got, f.want) {
			errorf(f.name, f.got, f.want)
		}
	}
	if w.fv != nil && !maps.Equal(c.FlagValues, w.fv) {
		errorf("flag_values", c.FlagValues, w.fv)
	}
	if w.assigns != nil && !maps.Equal(c.Assignments, w.assigns) {
		errorf("assignments", c.Assignments, w.assigns)
	}
	if w.wrappers != nil {
		var got []string
		for _, wr := range c.Wrappers {
			got = append(got, strings.Join(wr.Argv, " "))
		}
		if !slices.Equal(got, w.wrappers) {
			errorf("wrappers", got, w.wrappers)
		}
	}
	if w.redirs != nil {
		var got []string
		for _, r := range c.Redirects {
			got = append(got, r.Op+" "+r.Target)
		}
		if !slices.Equal(got, w.redirs) {
			errorf("redirects", got, w.redirs)
		}
	}
	if c.ReadsStdinScript != w.stdin {
		errorf("reads_stdin_script", c.ReadsStdinScript, w.stdin)
	}
	if c.Dynamic != w.dynamic {
		errorf("dynamic", c.Dynamic, w.dynamic)
	}
}

func checkParsedScript(t *testing.T, s *wire.Script, w *scriptWant) {
	t.Helper()
	if s == nil {
		t.Fatalf("script = nil, want one")
	}
	if !w.skipShell && s.Shell != w.shell {
		t.Errorf("script.shell = %q, want %q", s.Shell, w.shell)
	}
	if s.HasSubstitution != w.subst {
		t.Errorf("script.has_substitution = %v, want %v", s.HasSubstitution, w.subst)
	}
	if s.PipesToShell != w.pipes {
		t.Errorf("script.pipes_to_shell = %v, want %v", s.PipesToShell, w.pipes)
	}
	switch {
	case w.anyErr && s.ParseError == "":
		t.Errorf("script.parse_error is empty, want one")
	case !w.anyErr && w.parseError == "" && s.ParseError != "":
		t.Errorf("script.parse_error = %q, want none", s.ParseError)
	case w.parseError != "" && !strings.Contains(s.ParseError, w.parseError):
		t.Errorf("script.parse_error = %q, want it to contain %q", s.ParseError, w.parseError)
	}
	if w.redirects != nil {
		var got []string
		for _, r := range s.Redirects {
			got = append(got, r.Op+" "+r.Target)
		}
		if !slices.Equal(got, w.redirects) {
			t.Errorf("script.redirects = %q, want %q", got, w.redirects)
		}
	}
	if w.funcs != nil && !slices.Equal(s.Functions, w.funcs) {
		t.Errorf("script.functions = %q, want %q", s.Functions, w.funcs)
	}
}

// checkInputInvariants checks what holds for every document: commands[0] is
// command, every path points at a command and has a source, and the JSON
// has no null except an absent script.
func checkInputInvariants(t testing.TB, in *wire.Input, argvMode bool) {
	t.Helper()
	if in.SchemaVersion != wire.InputSchemaVersion {
		t.Errorf("schema_version = %d", in.SchemaVersion)
	}
	if argvMode && len(in.Commands) == 0 {
		t.Fatalf("argv mode gave no commands")
	}
	if len(in.Commands) > 0 {
		a, _ := json.Marshal(in.Command)
		b, _ := json.Marshal(in.Commands[0])
		if string(a) != string(b) {
			t.Errorf("command != commands[0]:\n %s\n %s", a, b)
		}
	}
	if argvMode && in.Commands[0].Origin != originArgv && in.Commands[0].Origin != originXargs {
		t.Errorf("commands[0].origin = %q", in.Commands[0].Origin)
	}
	for i, p := range in.Paths {
		if p.Source != sourceArg && p.Source != sourceRedirect && p.Source != sourceProgram {
			t.Errorf("paths[%d].source = %q", i, p.Source)
		}
		if p.Command < 0 || p.Command >= len(in.Commands) {
			t.Errorf("paths[%d].command = %d, have %d commands", i, p.Command, len(in.Commands))
		}
		if p.InsideVault && (p.Path == "" || p.Path[0] != '/' || aboveRoot(p.Path)) {
			t.Errorf("paths[%d] inside the vault but path %q", i, p.Path)
		}
		if !p.Where.Valid() || p.InsideVault != (p.Where == wire.WhereVault) {
			t.Errorf("paths[%d] where %q with inside_vault %v", i, p.Where, p.InsideVault)
		}
		switch p.Role {
		case wire.RoleRead, wire.RoleWrite, wire.RoleExecute, wire.RoleUnknown:
		default:
			t.Errorf("paths[%d].role = %q", i, p.Role)
		}
		if p.Source == sourceProgram && p.Role != wire.RoleExecute {
			t.Errorf("paths[%d] is the program but its role is %q", i, p.Role)
		}
	}
	for i, c := range in.Commands {
		if c.Code == nil {
			t.Errorf("commands[%d].code is nil", i)
		}
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if in.Script == nil {
		delete(doc, "script")
	}
	if where := findJSONNull(doc, "input"); where != "" {
		t.Errorf("null at %s in %s", where, data)
	}
}

// findJSONNull returns the location of the first JSON null in v, or "".
func findJSONNull(v any, at string) string {
	switch v := v.(type) {
	case nil:
		return at
	case map[string]any:
		for k, x := range v {
			if w := findJSONNull(x, at+"."+k); w != "" {
				return w
			}
		}
	case []any:
		for i, x := range v {
			if w := findJSONNull(x, at+"["+strconv.Itoa(i)+"]"); w != "" {
				return w
			}
		}
	}
	return ""
}

func TestParseArgv(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name:     "plain command",
			req:      argvReq("git", "status"),
			cmds:     []cmdWant{{prog: "git", path: "BIN/git", origin: "argv", pipe: "0/1", argv: []string{"git", "status"}, flags: []string{}, ops: []string{"status"}, wrappers: []string{}}},
			paths:    []string{},
			noScript: true,
			check: func(t *testing.T, in *wire.Input) {
				if in.Command.Raw != "git status" || !slices.Equal(in.Command.Args, []string{"status"}) {
					t.Errorf("raw %q args %q", in.Command.Raw, in.Command.Args)
				}
			},
		},
		{
			name: "flags split",
			req:  argvReq("rm", "-rf", "--no-preserve-root", "--out=x", "-o/tmp/y", "-n5", "--", "-v", "./a"),
			cmds: []cmdWant{{
				prog:  "rm",
				flags: []string{"-r", "-f", "--no-preserve-root", "--out", "-o", "-n", "-5"},
				fv:    map[string]string{"--out": "x", "-o": "/tmp/y"},
				ops:   []string{"-v", "./a"},
			}},
			paths: []string{"/tmp/y=/tmp/y outside arg@0", "-v=/src/-v vault arg@0", "./a=/src/a vault arg@0"},
		},
		{
			name: "lone dash and odd dashes are operands",
			req:  argvReq("cat", "-", "-/x", "-é"),
			cmds: []cmdWant{{prog: "cat", flags: []string{}, ops: []string{"-", "-/x", "-é"}}},
		},
		{
			name: "raw quotes words",
			req:  argvReq("echo", "a b", "it's", ""),
			check: func(t *testing.T, in *wire.Input) {
				if want := `echo 'a b' 'it'\''s' ''`; in.Command.Raw != want {
					t.Errorf("raw = %s, want %s", in.Command.Raw, want)
				}
			},
		},
		{
			name: "absolute program path",
			req:  argvReq("/usr/bin/curl", "x"),
			cmds: []cmdWant{{prog: "curl", argv: []string{"/usr/bin/curl", "x"}, ops: []string{"x"}}},
			check: func(t *testing.T, in *wire.Input) {
				want := ""
				if isExecutable("/usr/bin/curl") {
					want = "/usr/bin/curl"
				}
				if in.Command.ProgramPath != want {
					t.Errorf("program_path = %q, want %q", in.Command.ProgramPath, want)
				}
			},
		},
		{
			name: "missing absolute program",
			req:  argvReq("/nonexistent/curl", "x"),
			cmds: []cmdWant{{prog: "curl", path: "none"}},
		},
		{
			name: "relative program kept",
			req:  argvReq("./run.sh", "--fast"),
			cmds: []cmdWant{{prog: "run.sh", path: "./run.sh", flags: []string{"--fast"}}},
		},
		{
			name: "program not on PATH",
			req:  argvReq("nosuchprogram"),
			cmds: []cmdWant{{prog: "nosuchprogram", path: "none"}},
		},
		{
			name: "not executable is not found",
			req:  argvReq("noexec"),
			cmds: []cmdWant{{prog: "noexec", path: "none"}},
		},
		{
			name: "leading assignments, PATH used for lookup",
			req:  argvReq("FOO=1", "PATH=/nonexistent", "curl", "x"),
			cmds: []cmdWant{{prog: "curl", path: "none", assigns: map[string]string{"FOO": "1", "PATH": "/nonexistent"}, wrappers: []string{}}},
		},
		{
			name: "assignment alone is the program",
			req:  argvReq("FOO=1"),
			cmds: []cmdWant{{prog: "FOO=1", assigns: map[string]string{}}},
		},
		{
			name:  "assignment values that are paths",
			req:   argvReq("LD_PRELOAD=/tmp/x.so", "dd", "if=/dev/sda", "of=out.img", "bs=1M"),
			cmds:  []cmdWant{{prog: "dd", ops: []string{"if=/dev/sda", "of=out.img", "bs=1M"}}},
			paths: []string{"/tmp/x.so=/tmp/x.so outside arg@0", "/dev/sda=/dev/sda outside arg@0", "out.img=/src/out.img vault arg@0"},
		},
		{
			name: "command -v is a lookup",
			req:  argvReq("command", "-v", "curl"),
			cmds: []cmdWant{{prog: "command", flags: []string{"-v"}, ops: []string{"curl"}, wrappers: []string{}}},
		},
		{
			name: "find -exec runs a command",
			req:  argvReq("find", ".", "-name", "*.o", "-exec", "rm", "-f", "{}", ";"),
			cmds: []cmdWant{
				{prog: "find", origin: "argv"},
				{prog: "rm", origin: "find", argv: []string{"rm", "-f", "{}"}, flags: []string{"-f"}},
			},
			paths: []string{".=/src vault arg@0"},
		},
		{
			name: "find -execdir with +",
			req:  argvReq("find", "/", "-execdir", "sh", "-c", "rm -rf ./x", "+"),
			cmds: []cmdWant{
				{prog: "find"},
				{prog: "sh", origin: "find"},
				{prog: "rm", origin: "script"},
			},
			paths: []string{"/=/ outside arg@0", "./x=/src/x vault arg@2"},
		},
		{
			name: "interpreters reading stdin",
			req:  argvReq("python3"),
			cmds: []cmdWant{{prog: "python3", path: "BIN/python3", stdin: true}},
		},
		{
			name:  "interpreter with a script file",
			req:   argvReq("python3", "-u", "tool.py", "--flag"),
			cmds:  []cmdWant{{prog: "python3", flags: []string{"-u", "--flag"}, ops: []string{"tool.py"}}},
			paths: []string{"tool.py=/src/tool.py vault arg@0"},
		},
		{
			name:     "python -c in argv is not a shell script",
			req:      argvReq("python", "-c", "import os; os.remove('/etc/x')"),
			cmds:     []cmdWant{{prog: "python"}},
			paths:    []string{},
			noScript: true,
		},
		{
			name: "python -m runs a module",
			req:  argvReq("python3", "-m", "http.server"),
			cmds: []cmdWant{{prog: "python3"}},
		},
		{
			name: "perl -pi -e with a file",
			req:  argvReq("perl", "-pi", "-e", "s/a/b/", "f.txt"),
			cmds: []cmdWant{{prog: "perl", ops: []string{"f.txt"}}},
		},
		{
			name:  "file operand programs",
			req:   argvReq("chmod", "-R", "755", "bin", "notes"),
			paths: []string{"bin=/src/bin vault arg@0", "notes=/src/notes vault arg@0"},
		},
		{
			name:  "urls and remotes are not paths for the programs that take them",
			req:   argvReq("scp", "https://example.com/a/b.git", "git@github.com:a/b.git", "host:dir/x", "dir/x:y"),
			paths: []string{"dir/x:y=/src/dir/x:y vault arg@0"},
		},
		{
			name:  "a clone's url is not a path, its directory is written",
			req:   argvReq("git", "clone", "git@github.com:a/b.git", "b"),
			paths: []string{"b=/src/b vault arg@0"},
			roles: []wire.Role{wire.RoleWrite},
		},
		{
			name:  "for other programs a url or host:path is a relative path",
			req:   argvReq("mytool", "x:/../../../etc/passwd", "s://../../../etc", "https://example.com/a"),
			paths: []string{"x:/../../../etc/passwd=/../etc/passwd outside arg@0", "s://../../../etc=/../etc outside arg@0", "https://example.com/a=/src/https:/example.com/a vault arg@0"},
		},
		{
			name:  "file url is a host path",
			req:   argvReq("curl", "file:///etc/passwd"),
			paths: []string{"file:///etc/passwd=/etc/passwd outside arg@0"},
		},
		{
			name: "su -c runs a shell script",
			req:  argvReq("su", "-", "root", "-c", "rm -rf /x"),
			cmds: []cmdWant{
				{prog: "su", ops: []string{"-", "root", "rm -rf /x"}},
				{prog: "rm", origin: "script", flags: []string{"-r", "-f"}},
			},
			paths:  []string{"/x=/x outside arg@1"},
			script: &scriptWant{shell: "sh"},
		},
		{
			name: "eval in argv",
			req:  argvReq("eval", "ls ./a"),
			cmds: []cmdWant{
				{prog: "eval", path: "none"},
				{prog: "ls", origin: "eval"},
			},
			paths: []string{"./a=/src/a vault arg@1"},
		},
	})
}

func TestParseWrappers(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "nested wrappers",
			req:  argvReq("sudo", "env", "FOO=1", "timeout", "5", "nice", "-n", "5", "curl", "x"),
			cmds: []cmdWant{{
				prog: "curl", path: "BIN/curl", origin: "argv", argv: []string{"curl", "x"}, ops: []string{"x"},
				wrappers: []string{"sudo", "env FOO=1", "timeout 5", "nice -n 5"},
				assigns:  map[string]string{"FOO": "1"},
			}},
			check: func(t *testing.T, in *wire.Input) {
				w := in.Command.Wrappers
				if !slices.Equal(w[2].Operands, []string{"5"}) || w[3].FlagValues["-n"] != "5" {
					t.Errorf("wrappers = %+v", w)
				}
				if in.Command.Raw != "sudo env FOO=1 timeout 5 nice -n 5 curl x" {
					t.Errorf("raw = %q", in.Command.Raw)
				}
			},
		},
		{
			name: "env options",
			req:  argvReq("env", "-i", "-u", "HOME", "-C", "sub", "--", "A=b", "ls", "./x"),
			cmds: []cmdWant{{prog: "ls", wrappers: []string{"env -i -u HOME -C sub -- A=b"}, assigns: map[string]string{"A": "b"}}},
			paths: []string{
				"sub=/src/sub vault arg@0",
				"./x=/src/sub/x vault arg@0",
			},
			check: func(t *testing.T, in *wire.Input) {
				w := in.Command.Wrappers[0]
				if !slices.Equal(w.Flags, []string{"-i", "-u", "-C"}) || w.FlagValues["-u"] != "HOME" || w.FlagValues["-C"] != "sub" {
					t.Errorf("env wrapper = %+v", w)
				}
			},
		},
		{
			name: "env -i curl",
			req:  argvReq("env", "-i", "curl"),
			cmds: []cmdWant{{prog: "curl", path: "BIN/curl", argv: []string{"curl"}, wrappers: []string{"env -i"}}},
		},
		{
			name: "env long options and lone dash",
			req:  argvReq("env", "-", "--unset=A", "--chdir", "/tmp", "ls"),
			cmds: []cmdWant{{prog: "ls", wrappers: []string{"env - --unset=A --chdir /tmp"}}},
			check: func(t *testing.T, in *wire.Input) {
				w := in.Command.Wrappers[0]
				if !slices.Equal(w.Flags, []string{"-i", "-u", "-C"}) || w.FlagValues["-C"] != "/tmp" || w.FlagValues["-u"] != "A" {
					t.Errorf("env wrapper = %+v", w)
				}
			},
		},
		{
			name: "env -S splits its string",
			req:  argvReq("env", "-S", "python3 -u 'a b'", "x.py"),
			cmds: []cmdWant{{prog: "python3", argv: []string{"python3", "-u", "a b", "x.py"}, wrappers: []string{"env -S python3 -u 'a b'"}}},
		},
		{
			name: "env alone stays env",
			req:  argvReq("env"),
			cmds: []cmdWant{{prog: "env", path: "BIN/env", wrappers: []string{}}},
		},
		{
			name: "env with only assignments stays env",
			req:  argvReq("env", "A=1"),
			cmds: []cmdWant{{prog: "env", ops: []string{"A=1"}, wrappers: []string{}}},
		},
		{
			name: "sudo options with values",
			req:  argvReq("sudo", "-u", "root", "-g", "wheel", "-C", "5", "-D", "/var", "-E", "--preserve-env=PATH", "HOME=/x", "ls"),
			cmds: []cmdWant{{prog: "ls", assigns: map[string]string{"HOME": "/x"},
				wrappers: []string{"sudo -u root -g wheel -C 5 -D /var -E --preserve-env=PATH HOME=/x"}}},
			paths: []string{"/var=/var outside arg@0", "/x=/x outside arg@0"},
			check: func(t *testing.T, in *wire.Input) {
				w := in.Command.Wrappers[0]
				want := map[string]string{"-u": "root", "-g": "wheel", "-C": "5", "-D": "/var", "-E": "PATH"}
				if !maps.Equal(w.FlagValues, want) {
					t.Errorf("sudo flag_values = %v, want %v", w.FlagValues, want)
				}
			},
		},
		{
			name: "sudo long and attached options",
			req:  argvReq("sudo", "--user=bob", "-uroot", "--group", "adm", "id"),
			cmds: []cmdWant{{prog: "id"}},
			check: func(t *testing.T, in *wire.Input) {
				w := in.Command.Wrappers[0]
				if w.FlagValues["-u"] != "root" || w.FlagValues["-g"] != "adm" || !slices.Equal(w.Flags, []string{"-u", "-u", "-g"}) {
					t.Errorf("sudo wrapper = %+v", w)
				}
			},
		},
		{
			name: "sudo -l stays sudo",
			req:  argvReq("sudo", "-l"),
			cmds: []cmdWant{{prog: "sudo", flags: []string{"-l"}, wrappers: []string{}}},
		},
		{
			name: "sudo -l with a command only lists",
			req:  argvReq("sudo", "-l", "rm"),
			cmds: []cmdWant{{prog: "sudo", ops: []string{"rm"}, wrappers: []string{}}},
		},
		{
			name:  "sudo -e edits files",
			req:   argvReq("sudo", "-e", "/etc/hosts"),
			cmds:  []cmdWant{{prog: "sudo", ops: []string{"/etc/hosts"}}},
			paths: []string{"/etc/hosts=/etc/hosts outside arg@0"},
		},
		{
			name: "sudo bash -c",
			req:  argvReq("sudo", "-u", "root", "bash", "-c", "rm -rf /"),
			cmds: []cmdWant{
				{prog: "bash", wrappers: []string{"sudo -u root"}, flags: []string{"-c"}, ops: []string{"rm -rf /"}},
				{prog: "rm", origin: "script", wrappers: []string{}},
			},
			paths:  []string{"/=/ outside arg@1"},
			script: &scriptWant{shell: "bash"},
		},
		{
			name: "doas",
			req:  argvReq("doas", "-u", "root", "ls"),
			cmds: []cmdWant{{prog: "ls", wrappers: []string{"doas -u root"}}},
		},
		{
			name: "timeout with options",
			req:  argvReq("timeout", "-k", "1s", "--signal=KILL", "--preserve-status", "10s", "make", "test"),
			cmds: []cmdWant{{prog: "make", ops: []string{"test"}, wrappers: []string{"timeout -k 1s --signal=KILL --preserve-status 10s"}}},
			check: func(t *testing.T, in *wire.Input) {
				w := in.Command.Wrappers[0]
				if !slices.Equal(w.Operands, []string{"10s"}) || w.FlagValues["-s"] != "KILL" || w.FlagValues["-k"] != "1s" {
					t.Errorf("timeout wrapper = %+v", w)
				}
			},
		},
		{
			name: "timeout without a command",
			req:  argvReq("timeout", "5"),
			cmds: []cmdWant{{prog: "timeout", ops: []string{"5"}, wrappers: []string{}}},
		},
		{
			name: "nice forms",
			req:  argvReq("nice", "-10", "nice", "--adjustment=3", "nice", "ls"),
			cmds: []cmdWant{{prog: "ls", wrappers: []string{"nice -10", "nice --adjustment=3", "nice"}}},
			check: func(t *testing.T, in *wire.Input) {
				if in.Command.Wrappers[0].FlagValues["-n"] != "10" || in.Command.Wrappers[1].FlagValues["-n"] != "3" {
					t.Errorf("nice wrappers = %+v", in.Command.Wrappers)
				}
			},
		},
		{
			name: "nohup stdbuf time setsid",
			req:  argvReq("nohup", "stdbuf", "-oL", "-e", "0", "time", "-p", "setsid", "-f", "ls"),
			cmds: []cmdWant{{prog: "ls", wrappers: []string{"nohup", "stdbuf -oL -e 0", "time -p", "setsid -f"}}},
			check: func(t *testing.T, in *wire.Input) {
				if in.Command.Wrappers[1].FlagValues["-o"] != "L" || in.Command.Wrappers[1].FlagValues["-e"] != "0" {
					t.Errorf("stdbuf = %+v", in.Command.Wrappers[1])
				}
			},
		},
		{
			name:  "time -o writes a file",
			req:   argvReq("time", "-o", "t.log", "ls"),
			cmds:  []cmdWant{{prog: "ls", wrappers: []string{"time -o t.log"}}},
			paths: []string{"t.log=/src/t.log vault arg@0"},
		},
		{
			name: "command -p and builtin and exec",
			req:  argvReq("command", "-p", "builtin", "exec", "-a", "fake", "-l", "ls"),
			cmds: []cmdWant{{prog: "ls", wrappers: []string{"command -p", "builtin", "exec -a fake -l"}}},
		},
		{
			name: "xargs -n1 rm",
			req:  argvReq("xargs", "-n1", "rm"),
			cmds: []cmdWant{{prog: "rm", path: "BIN/rm", origin: "xargs", argv: []string{"rm"}, wrappers: []string{"xargs -n1"}}},
			check: func(t *testing.T, in *wire.Input) {
				if in.Command.Wrappers[0].FlagValues["-n"] != "1" {
					t.Errorf("xargs = %+v", in.Command.Wrappers[0])
				}
			},
		},
		{
			name:  "xargs options with values",
			req:   argvReq("xargs", "-0", "-I", "{}", "-P", "4", "-d", "\n", "-E", "END", "-L", "2", "-s", "100", "-a", "list.txt", "-i", "--max-args=3", "cp", "{}", "/backup/"),
			cmds:  []cmdWant{{prog: "cp", origin: "xargs", argv: []string{"cp", "{}", "/backup/"}}},
			paths: []string{"list.txt=/src/list.txt vault arg@0", "/backup/=/backup outside arg@0"},
			check: func(t *testing.T, in *wire.Input) {
				fv := in.Command.Wrappers[0].FlagValues
				want := map[string]string{"-I": "{}", "-P": "4", "-d": "\n", "-E": "END", "-L": "2", "-s": "100", "-a": "list.txt", "-n": "3"}
				if !maps.Equal(fv, want) {
					t.Errorf("xargs flag_values = %q, want %q", fv, want)
				}
			},
		},
		{
			name:   "xargs runs scripts named on stdin, not stdin itself",
			req:    shellReq("find . -name '*.sh' | xargs bash"),
			cmds:   []cmdWant{{prog: "find"}, {prog: "bash", origin: "xargs", pipe: "1/2"}},
			script: &scriptWant{},
		},
		{
			name: "xargs alone runs echo, stays xargs",
			req:  argvReq("xargs", "-0"),
			cmds: []cmdWant{{prog: "xargs", origin: "argv"}},
		},
		{
			name: "xargs sh -c",
			req:  argvReq("xargs", "-I{}", "sh", "-c", "cat {} | wc -l"),
			cmds: []cmdWant{
				{prog: "sh", origin: "xargs"},
				{prog: "cat", origin: "script", pipe: "0/2"},
				{prog: "wc", origin: "script", pipe: "1/2"},
			},
		},
		{
			name: "busybox wget",
			req:  argvReq("busybox", "wget", "x"),
			cmds: []cmdWant{{prog: "wget", path: "BIN/busybox", argv: []string{"wget", "x"}, wrappers: []string{"busybox"}}},
		},
		{
			name: "busybox sh -c",
			req:  argvReq("busybox", "sh", "-c", "wget x"),
			cmds: []cmdWant{
				{prog: "sh", path: "BIN/busybox", wrappers: []string{"busybox"}},
				{prog: "wget", origin: "script"},
			},
			script: &scriptWant{shell: "sh"},
		},
		{
			name: "busybox env runs from PATH",
			req:  argvReq("busybox", "env", "curl"),
			cmds: []cmdWant{{prog: "curl", path: "BIN/curl", wrappers: []string{"busybox", "env"}}},
		},
		{
			name: "busybox --list stays busybox",
			req:  argvReq("busybox", "--list"),
			cmds: []cmdWant{{prog: "busybox", wrappers: []string{}}},
		},
		{
			name: "ionice chrt taskset",
			req:  argvReq("ionice", "-c", "3", "-n7", "chrt", "-f", "10", "taskset", "-c", "0,1", "ls"),
			cmds: []cmdWant{{prog: "ls", wrappers: []string{"ionice -c 3 -n7", "chrt -f 10", "taskset -c 0,1"}}},
			check: func(t *testing.T, in *wire.Input) {
				w := in.Command.Wrappers
				if w[0].FlagValues["-c"] != "3" || w[0].FlagValues["-n"] != "7" || !slices.Equal(w[1].Operands, []string{"10"}) || !slices.Equal(w[2].Operands, []string{"0,1"}) {
					t.Errorf("wrappers = %+v", w)
				}
			},
		},
		{
			name: "ionice -p runs nothing",
			req:  argvReq("ionice", "-c", "3", "-p", "1234"),
			cmds: []cmdWant{{prog: "ionice", wrappers: []string{}}},
		},
		{
			name:  "flock runs a command",
			req:   argvReq("flock", "-w", "5", "/tmp/lock", "make"),
			cmds:  []cmdWant{{prog: "make", wrappers: []string{"flock -w 5 /tmp/lock"}}},
			paths: []string{"/tmp/lock=/tmp/lock outside arg@0"},
		},
		{
			name: "flock -c runs a script",
			req:  argvReq("flock", "lock", "-c", "rm -rf ./a/b"),
			cmds: []cmdWant{
				{prog: "flock", wrappers: []string{}},
				{prog: "rm", origin: "script"},
			},
			paths:  []string{"./a/b=/src/a/b vault arg@1"},
			script: &scriptWant{shell: "sh"},
		},
		{
			name:  "chroot",
			req:   argvReq("chroot", "/mnt", "ls"),
			cmds:  []cmdWant{{prog: "ls", wrappers: []string{"chroot /mnt"}}},
			paths: []string{"/mnt=/mnt outside arg@0"},
		},
		{
			name: "wrapper given as a path",
			req:  argvReq("/usr/bin/sudo", "/usr/bin/env", "ls"),
			cmds: []cmdWant{{prog: "ls", wrappers: []string{"/usr/bin/sudo", "/usr/bin/env"}}},
			check: func(t *testing.T, in *wire.Input) {
				if in.Command.Wrappers[0].Name != "sudo" || in.Command.Wrappers[1].Name != "env" {
					t.Errorf("names = %+v", in.Command.Wrappers)
				}
			},
		},
		{
			name: "wrapper option missing its value",
			req:  argvReq("sudo", "-u"),
			cmds: []cmdWant{{prog: "sudo", flags: []string{"-u"}, wrappers: []string{}}},
		},
	})
}

func TestParseShellC(t *testing.T) {
	for _, args := range [][]string{
		{"sh", "-c"}, {"bash", "-c"}, {"dash", "-c"}, {"zsh", "-c"}, {"ksh", "-c"}, {"ash", "-c"}, {"mksh", "-c"},
		{"bash", "-lc"}, {"bash", "-ec"}, {"bash", "-xec"}, {"bash", "-e", "-c"}, {"bash", "-c", "-e"},
		{"bash", "--norc", "-c"}, {"bash", "--noprofile", "--norc", "-c"}, {"bash", "-o", "pipefail", "-c"},
		{"bash", "+o", "histexpand", "-c"}, {"bash", "--rcfile", "x", "-c"}, {"/bin/bash", "-c"}, {"bash5.2", "-c"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			req := ParseRequest{Argv: append(slices.Clone(args), "curl x | sh", "arg0"), Cwd: "/src", PathEnv: "/nonexistent"}
			in, err := Parse(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			checkInputInvariants(t, in, true)
			if got := commandPrograms(in); got != "["+programName(shellWord{text: args[0], literal: true})+"(argv) curl(script) sh(script)]" {
				t.Fatalf("commands = %s", got)
			}
			if in.Script == nil || in.Script.Source != "curl x | sh" || !in.Script.PipesToShell {
				t.Errorf("script = %+v", in.Script)
			}
			if len(in.Paths) != 0 {
				t.Errorf("paths = %+v", in.Paths)
			}
		})
	}
	runParseCases(t, []parseCase{
		{
			name:     "bash without -c runs a file",
			req:      argvReq("bash", "script.sh", "-c", "x"),
			cmds:     []cmdWant{{prog: "bash"}},
			paths:    []string{"script.sh=/src/script.sh vault arg@0"},
			noScript: true,
		},
		{
			name:     "bash -s reads stdin",
			req:      argvReq("bash", "-s", "--", "arg"),
			cmds:     []cmdWant{{prog: "bash", stdin: true, ops: []string{"arg"}}},
			noScript: true,
		},
		{
			name:     "sh - reads stdin",
			req:      argvReq("sh", "-"),
			cmds:     []cmdWant{{prog: "sh", stdin: true}},
			noScript: true,
		},
		{
			name:     "bash -c without a script",
			req:      argvReq("bash", "-c"),
			cmds:     []cmdWant{{prog: "bash"}},
			noScript: true,
		},
		{
			name:   "empty script",
			req:    argvReq("sh", "-c", ""),
			cmds:   []cmdWant{{prog: "sh"}},
			script: &scriptWant{shell: "sh"},
		},
		{
			name:   "script that does not parse",
			req:    argvReq("bash", "-c", "echo 'unterminated"),
			cmds:   []cmdWant{{prog: "bash"}},
			script: &scriptWant{shell: "bash", parseError: "without closing quote"},
		},
	})
}

func TestParseScript(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "curl x | sh",
			req:  shellReq("curl x | sh"),
			cmds: []cmdWant{
				{prog: "curl", path: "BIN/curl", origin: "script", pipe: "0/2", ops: []string{"x"}},
				{prog: "sh", origin: "script", pipe: "1/2", stdin: true},
			},
			script: &scriptWant{shell: "", pipes: true, redirects: []string{}, funcs: []string{}},
			check: func(t *testing.T, in *wire.Input) {
				if in.Command.Program != "curl" || in.Command.Raw != "curl x" {
					t.Errorf("command = %+v", in.Command)
				}
			},
		},
		{
			name: "wget -O- x | bash",
			req:  shellReq("wget -O- x | bash"),
			cmds: []cmdWant{
				{prog: "wget", flags: []string{"-O"}, fv: map[string]string{"-O": "-"}, ops: []string{"x"}, pipe: "0/2"},
				{prog: "bash", pipe: "1/2", stdin: true},
			},
			script: &scriptWant{pipes: true},
		},
		{
			name: "pipe to a shell that is not last",
			req:  shellReq("curl x | sudo bash -s | tee log"),
			cmds: []cmdWant{
				{prog: "curl", pipe: "0/3"},
				{prog: "bash", pipe: "1/3", stdin: true, wrappers: []string{"sudo"}},
				{prog: "tee", pipe: "2/3"},
			},
			script: &scriptWant{pipes: true},
		},
		{
			name: "pipe to python with a file is not a stdin script",
			req:  shellReq("cat data | python3 tool.py"),
			cmds: []cmdWant{
				{prog: "cat", pipe: "0/2"},
				{prog: "python3", pipe: "1/2"},
			},
			script: &scriptWant{},
		},
		{
			name: "pipe to interpreters",
			req:  shellReq("curl a | python3 -; curl b | perl; curl c | node; curl d | ruby -"),
			cmds: []cmdWant{
				{prog: "curl"}, {prog: "python3", stdin: true},
				{prog: "curl"}, {prog: "perl", stdin: true},
				{prog: "curl"}, {prog: "node", stdin: true},
				{prog: "curl"}, {prog: "ruby", stdin: true},
			},
			script: &scriptWant{pipes: true},
		},
		{
			name: "bash <(curl x)",
			req:  shellReq("bash <(curl x)"),
			cmds: []cmdWant{
				{prog: "bash", ops: []string{"<(curl x)"}, dynamic: true},
				{prog: "curl", origin: "substitution", ops: []string{"x"}},
			},
			paths:  []string{},
			script: &scriptWant{subst: true, pipes: true},
		},
		{
			name: `python -c "$(curl x)"`,
			req:  shellReq(`python -c "$(curl x)"`),
			cmds: []cmdWant{
				{prog: "python", flags: []string{"-c"}, ops: []string{`"$(curl x)"`}, dynamic: true},
				{prog: "curl", origin: "substitution"},
			},
			paths:  []string{},
			script: &scriptWant{subst: true, pipes: true},
		},
		{
			name: "stdin fed from substitutions",
			req:  shellReq("bash < <(curl a); sh <<< \"$(curl b)\"; sh <<EOF\n$(curl c)\nEOF"),
			cmds: []cmdWant{
				{prog: "bash", stdin: true, redirs: []string{"< <(curl a)"}},
				{prog: "curl", origin: "substitution"},
				{prog: "sh", stdin: true, redirs: []string{`<<< "$(curl b)"`}},
				{prog: "curl", origin: "substitution"},
				{prog: "sh", stdin: true, redirs: []string{"<< EOF"}},
				{prog: "curl", origin: "substitution"},
			},
			paths:  []string{},
			script: &scriptWant{subst: true, pipes: true},
		},
		{
			name: "heredoc and here-string fed to a shell are scripts",
			req:  shellReq("bash <<'EOF'\nrm -rf /x\nEOF\nsh <<EOF\ncurl \\$HOME a\\\\b\nEOF\nsudo sh -s <<< 'wget y'; python3 <<EOF\nimport os\nEOF\nsource /dev/stdin <<< 'id'"),
			cmds: []cmdWant{
				{prog: "bash", stdin: true, redirs: []string{"<< EOF"}},
				{prog: "rm", origin: "script"},
				{prog: "sh", stdin: true},
				{prog: "curl", origin: "script", dynamic: true, ops: []string{"$HOME", "ab"}},
				{prog: "sh", stdin: true, wrappers: []string{"sudo"}},
				{prog: "wget", origin: "script"},
				{prog: "python3", stdin: true},
				{prog: "source", stdin: true},
				{prog: "id", origin: "script"},
			},
			paths:  []string{"/x=/x outside arg@1", "/dev/stdin=/dev/stdin outside arg@7"},
			script: &scriptWant{},
		},
		{
			name: "eval of a substitution",
			req:  shellReq(`eval "$(curl x)"`),
			cmds: []cmdWant{
				{prog: "eval", dynamic: true},
				{prog: "curl", origin: "substitution"},
			},
			script: &scriptWant{subst: true, pipes: true},
		},
		{
			name: "source of a process substitution",
			req:  shellReq(`source <(curl x)`),
			cmds: []cmdWant{
				{prog: "source", dynamic: true},
				{prog: "curl", origin: "substitution"},
			},
			script: &scriptWant{subst: true, pipes: true},
		},
		{
			name: "lists",
			req:  shellReq("a && b || c; d & e"),
			cmds: []cmdWant{{prog: "a"}, {prog: "b"}, {prog: "c"}, {prog: "d"}, {prog: "e"}},
		},
		{
			name: "subshells, blocks and control flow",
			req: shellReq(`(a; b) && { c; }
if d; then e; elif f; then g; else h; fi
while i; do j; done; until k; do l; done
for x in 1 2; do m "$x"; done; for ((n=0; n<3; n++)); do o; done
case $y in a) p;; *) q;; esac
select z in a b; do r; done`),
			cmds: []cmdWant{
				{prog: "a"}, {prog: "b"}, {prog: "c"}, {prog: "d"}, {prog: "e"}, {prog: "f"}, {prog: "g"}, {prog: "h"},
				{prog: "i"}, {prog: "j"}, {prog: "k"}, {prog: "l"}, {prog: "m", argv: []string{"m", "1"}}, {prog: "m", argv: []string{"m", "2"}}, {prog: "o"}, {prog: "p"}, {prog: "q"}, {prog: "r"},
			},
		},
		{
			name: "substitutions everywhere",
			req:  shellReq("echo $(a) `b` \"$(c)\" ${x:-$(d)} <(e) >(f) $((1 + $(g))); for i in $(h); do :; done; case $(i) in *) ;; esac; [[ -n $(j) ]]; (( $(k) )); let x=$(l); v=$(m)"),
			cmds: []cmdWant{
				{prog: "echo", dynamic: true},
				{prog: "a", origin: "substitution"}, {prog: "b", origin: "substitution"}, {prog: "c", origin: "substitution"},
				{prog: "d", origin: "substitution"}, {prog: "e", origin: "substitution"}, {prog: "f", origin: "substitution"},
				{prog: "g", origin: "substitution"},
				{prog: "h", origin: "substitution"}, {prog: ":"},
				{prog: "i", origin: "substitution"}, {prog: "j", origin: "substitution"}, {prog: "k", origin: "substitution"},
				{prog: "l", origin: "substitution"},
				{prog: "", argv: []string{}, assigns: map[string]string{"v": "$(m)"}, dynamic: true},
				{prog: "m", origin: "substitution"},
			},
			script: &scriptWant{subst: true},
		},
		{
			name: "arithmetic is not a command",
			req:  shellReq("(( x = 1 + 2 )); let y=3; echo $((x * 2))"),
			cmds: []cmdWant{{prog: "echo", dynamic: true}},
		},
		{
			name: "nested substitution",
			req:  shellReq("echo $(cat $(ls /etc))"),
			cmds: []cmdWant{
				{prog: "echo", dynamic: true},
				{prog: "cat", origin: "substitution", dynamic: true},
				{prog: "ls", origin: "substitution"},
			},
			paths: []string{"$(ls /etc)=$(ls /etc) unknown arg@1", "/etc=/etc outside arg@2"},
			roles: []wire.Role{wire.RoleRead, wire.RoleRead},
		},
		{
			name: "eval of literal strings",
			req:  shellReq(`eval "rm -rf ./a" '&& ls'`),
			cmds: []cmdWant{
				{prog: "eval", ops: []string{"rm -rf ./a", "&& ls"}},
				{prog: "rm", origin: "eval", flags: []string{"-r", "-f"}},
				{prog: "ls", origin: "eval"},
			},
			paths: []string{"./a=/src/a vault arg@1"},
		},
		{
			name: "eval nested too deep",
			req:  shellReq(strings.Repeat("eval ", 12) + "ls"),
			check: func(t *testing.T, in *wire.Input) {
				if len(in.Commands) != maxScriptDepth+1 || !strings.Contains(in.Script.ParseError, "nested") {
					t.Errorf("got %d commands, parse_error %q", len(in.Commands), in.Script.ParseError)
				}
			},
		},
		{
			name: "nested bash -c",
			req:  shellReq(`bash -c "sh -c 'rm -rf /x'"`),
			cmds: []cmdWant{
				{prog: "bash", ops: []string{"sh -c 'rm -rf /x'"}},
				{prog: "sh", ops: []string{"rm -rf /x"}},
				{prog: "rm", origin: "script"},
			},
			paths: []string{"/x=/x outside arg@2"},
		},
		{
			name: "bash -c nested too deep",
			req:  shellReq(nestedBashC(10, "ls")),
			check: func(t *testing.T, in *wire.Input) {
				if in.Script.ParseError == "" {
					t.Errorf("no parse error for %d commands", len(in.Commands))
				}
			},
		},
		{
			name: "fork bomb",
			req:  shellReq(":(){ :|:& };:"),
			cmds: []cmdWant{
				{prog: ":", pipe: "0/2"},
				{prog: ":", pipe: "1/2"},
				{prog: ":", pipe: "0/1"},
			},
			script: &scriptWant{funcs: []string{":"}},
		},
		{
			name: "function bodies and calls",
			req:  shellReq("function f { rm -rf ./x; }; g() ( curl y ); f; g"),
			cmds: []cmdWant{
				{prog: "rm"}, {prog: "curl"}, {prog: "f", path: "none"}, {prog: "g"},
			},
			script: &scriptWant{funcs: []string{"f", "g"}},
		},
		{
			name:   "heredoc body is not a command",
			req:    shellReq("cat <<'EOF' > out.txt\nrm -rf /\n$(curl x)\nEOF"),
			cmds:   []cmdWant{{prog: "cat", redirs: []string{"<< EOF", "> out.txt"}}},
			paths:  []string{"out.txt=/src/out.txt vault redirect@0"},
			script: &scriptWant{redirects: []string{"<< EOF", "> out.txt"}},
		},
		{
			name: "redirects",
			req:  shellReq("a > o1 >> o2 < i1 2> e1 &> b1 &>> b2 >| c1 <> d1 2>&1 >&2 1>&- >& f1 3<&0 <<< str 0< i2 {fd}> g1"),
			cmds: []cmdWant{{prog: "a"}},
			script: &scriptWant{redirects: []string{
				"> o1", ">> o2", "< i1", "2> e1", "&> b1", "&>> b2", ">| c1", "<> d1", "2>& 1", ">& 2", "1>& -",
				">& f1", "3<& 0", "<<< str", "0< i2", "{fd}> g1",
			}},
			paths: []string{
				"o1=/src/o1 vault redirect@0", "o2=/src/o2 vault redirect@0", "i1=/src/i1 vault redirect@0", "e1=/src/e1 vault redirect@0",
				"b1=/src/b1 vault redirect@0", "b2=/src/b2 vault redirect@0", "c1=/src/c1 vault redirect@0", "d1=/src/d1 vault redirect@0",
				"f1=/src/f1 vault redirect@0", "i2=/src/i2 vault redirect@0", "g1=/src/g1 vault redirect@0",
			},
		},
		{
			name:  "redirect of a block goes to its commands",
			req:   shellReq("{ a; b; } > /tmp/out"),
			cmds:  []cmdWant{{prog: "a", redirs: []string{"> /tmp/out"}}, {prog: "b", redirs: []string{"> /tmp/out"}}},
			paths: []string{"/tmp/out=/tmp/out outside redirect@0"},
		},
		{
			name: "bare redirect and assignment",
			req:  shellReq("> /etc/motd; X=./y; $(< /etc/shadow)"),
			cmds: []cmdWant{
				{prog: "", argv: []string{}, redirs: []string{"> /etc/motd"}},
				{prog: "", argv: []string{}, assigns: map[string]string{"X": "./y"}},
				{prog: "$(< /etc/shadow)", dynamic: true},
				{prog: "", origin: "substitution", redirs: []string{"< /etc/shadow"}},
			},
			paths: []string{"/etc/motd=/etc/motd outside redirect@0", "./y=/src/y vault arg@1", "/etc/shadow=/etc/shadow outside redirect@3"},
		},
		{
			name: "words that are not literal",
			req:  shellReq(`$CMD -x "$HOME/.ssh" "${DIR}/a" 'single $x' "dq \"q\" \$x" a\ b $'\x72m' ~/x`),
			cmds: []cmdWant{{
				prog: "$CMD", path: "none", dynamic: true, flags: []string{"-x"},
				ops: []string{`"$HOME/.ssh"`, `"${DIR}/a"`, "single $x", `dq "q" $x`, "a b", "rm", "~/x"},
			}},
			paths: []string{`"$HOME/.ssh"="$HOME/.ssh" unknown arg@0`, `"${DIR}/a"="${DIR}/a" unknown arg@0`, "~/x=~/x outside arg@0"},
		},
		{
			name: "ansi-c quoting decodes",
			req:  shellReq(`$'\x72\x6d' $'-r\146' $'\u00e9\t\101\cA\''`),
			cmds: []cmdWant{{prog: "rm", flags: []string{"-r", "-f"}, ops: []string{"é\tA\x01'"}}},
		},
		{
			name: "declarations",
			req:  shellReq("export PATH=/tmp/evil:$PATH LD_PRELOAD=/x.so; local -r y=1; declare -a arr=(1 2)"),
			cmds: []cmdWant{
				{prog: "export", dynamic: true, ops: []string{"PATH=/tmp/evil:$PATH", "LD_PRELOAD=/x.so"},
					assigns: map[string]string{"PATH": "/tmp/evil:$PATH", "LD_PRELOAD": "/x.so"}},
				{prog: "local", flags: []string{"-r"}, ops: []string{"y=1"}},
				{prog: "declare", dynamic: true, flags: []string{"-a"}, ops: []string{"arr=(1 2)"}},
			},
			paths: []string{"/tmp/evil:$PATH=/tmp/evil:$PATH outside arg@0", "/x.so=/x.so outside arg@0"},
		},
		{
			name: "time keyword",
			req:  shellReq("time -p sleep 1; time ls"),
			cmds: []cmdWant{
				{prog: "sleep", wrappers: []string{"time -p"}},
				{prog: "ls", wrappers: []string{"time"}},
			},
		},
		{
			name: "wrappers and assignments in scripts",
			req:  shellReq("FOO=1 sudo -u bob env BAR=2 xargs -n1 rm < list"),
			cmds: []cmdWant{{prog: "rm", origin: "xargs", wrappers: []string{"sudo -u bob", "env BAR=2", "xargs -n1"},
				assigns: map[string]string{"FOO": "1", "BAR": "2"}, redirs: []string{"< list"}}},
			paths: []string{"list=/src/list vault redirect@0"},
		},
		{
			name: "alias values run later",
			req:  shellReq("shopt -s expand_aliases; alias ll='ls -l' x='rm -rf /'; x"),
			cmds: []cmdWant{
				{prog: "shopt"},
				{prog: "alias", ops: []string{"ll=ls -l", "x=rm -rf /"}},
				{prog: "ls", origin: "eval"},
				{prog: "rm", origin: "eval"},
				{prog: "x"},
			},
			paths: []string{"/=/ outside arg@3"},
		},
		{
			name: "brace expansion of static words gives words",
			req:  shellReq("cat {..,..}/../etc/passwd a{b,c}d {1..2}"),
			cmds: []cmdWant{{prog: "cat", ops: []string{"../../etc/passwd", "../../etc/passwd", "abd", "acd", "1", "2"}}},
			paths: []string{
				"../../etc/passwd=/../etc/passwd outside arg@0",
				"../../etc/passwd=/../etc/passwd outside arg@0",
				"abd=/src/abd vault arg@0", "acd=/src/acd vault arg@0", "1=/src/1 vault arg@0", "2=/src/2 vault arg@0",
			},
		},
		{
			name: "brace expansion that is not static is not a literal",
			req:  shellReq("cat {..,$x}/etc/passwd {1..300}"),
			cmds: []cmdWant{{prog: "cat", dynamic: true, ops: []string{"{..,$x}/etc/passwd", "{1..300}"}}},
			paths: []string{
				"{..,$x}/etc/passwd={..,$x}/etc/passwd unknown arg@0",
				"{1..300}={1..300} unknown arg@0",
			},
		},
		{
			name: "globs that may match ..",
			req:  shellReq("cat .*/.*/etc/passwd ./*.go .git/* x/.?/y .[!.]* .[.]/x .[a-z]*"),
			paths: []string{
				".*/.*/etc/passwd=.*/.*/etc/passwd unknown arg@0",
				"./*.go=/src/*.go vault arg@0",
				".git/*=/src/.git/* vault arg@0",
				"x/.?/y=x/.?/y unknown arg@0",
				".[!.]*=/src/.[!.]* vault arg@0",
				".[.]/x=.[.]/x unknown arg@0",
				".[a-z]*=/src/.[a-z]* vault arg@0",
			},
		},
		{
			name: "trap action",
			req:  shellReq("trap 'rm -rf ./tmp' EXIT"),
			cmds: []cmdWant{
				{prog: "trap", ops: []string{"rm -rf ./tmp", "EXIT"}},
				{prog: "rm", origin: "eval"},
			},
			paths: []string{"./tmp=/src/tmp vault arg@1"},
		},
		{
			name:   "comments only",
			req:    shellReq("# nothing here\n   # more"),
			cmds:   []cmdWant{},
			paths:  []string{},
			script: &scriptWant{},
			check: func(t *testing.T, in *wire.Input) {
				if in.Command.Program != "" || in.Command.Argv == nil || in.Command.Origin != "script" {
					t.Errorf("command = %+v", in.Command)
				}
			},
		},
		{
			name:   "script that does not parse",
			req:    shellReq("if then fi ("),
			cmds:   []cmdWant{},
			script: &scriptWant{anyErr: true},
		},
		{
			name:   "brackets nested too deep",
			req:    shellReq(strings.Repeat("(", maxNesting+1) + "ls" + strings.Repeat(")", maxNesting+1)),
			cmds:   []cmdWant{},
			script: &scriptWant{parseError: "nested deeper than"},
		},
		{
			name: "substitutions nested deep but not too deep",
			req:  shellReq(strings.Repeat("echo $(", maxNesting) + "ls" + strings.Repeat(")", maxNesting)),
			check: func(t *testing.T, in *wire.Input) {
				if len(in.Commands) != maxNesting+1 || in.Script.ParseError != "" {
					t.Errorf("%d commands, parse error %q", len(in.Commands), in.Script.ParseError)
				}
			},
		},
		{
			name:   "unary operators in a row",
			req:    shellReq("echo $((" + strings.Repeat("! ", maxOpRun+1) + "1))"),
			cmds:   []cmdWant{},
			script: &scriptWant{parseError: "operators in a row"},
		},
		{
			name: "eval string too long",
			req:  argvReq("eval", strings.Repeat("a ", maxWordBytes/4), strings.Repeat("b ", maxWordBytes/4), strings.Repeat("c ", maxWordBytes/4)),
			check: func(t *testing.T, in *wire.Input) {
				if len(in.Commands) != 1 || !strings.Contains(in.Script.ParseError, "longer than") {
					t.Errorf("%d commands, parse error %q", len(in.Commands), in.Script.ParseError)
				}
			},
		},
		{
			name: "coproc and test clauses",
			req:  shellReq("coproc cat; [[ -f x ]] && ls"),
			cmds: []cmdWant{{prog: "cat"}, {prog: "ls"}},
		},
	})
}

// nestedBashC wraps cmd in n levels of bash -c, quoting each level.
func nestedBashC(n int, cmd string) string {
	for range n {
		var sb strings.Builder
		sb.WriteString("bash -c ")
		quoteWord(&sb, cmd)
		cmd = sb.String()
	}
	return cmd
}

func TestParsePaths(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "resolution against cwd",
			req:  argvReq("cp", "../x", "../../x", "~/.ssh", "$HOME/x", "${HOME}", "/etc/passwd", "./a", "a/b", ".", "..", "~bob/y", "/a/../../b", "./c/../../../d"),
			paths: []string{
				"../x=/x vault arg@0",
				"../../x=/../x outside arg@0",
				"~/.ssh=~/.ssh outside arg@0",
				"$HOME/x=~/x outside arg@0",
				"${HOME}=~ outside arg@0",
				"/etc/passwd=/etc/passwd outside arg@0",
				"./a=/src/a vault arg@0",
				"a/b=/src/a/b vault arg@0",
				".=/src vault arg@0",
				"..=/ vault arg@0",
				"~bob/y=~bob/y outside arg@0",
				"/a/../../b=/b outside arg@0",
				"./c/../../../d=/../d outside arg@0",
			},
		},
		{
			name:  "cwd at the root",
			req:   ParseRequest{Argv: []string{"ls", "../etc", "x/y"}, Cwd: "/"},
			paths: []string{"../etc=/../etc outside arg@0", "x/y=/x/y vault arg@0"},
		},
		{
			name:  "flag values",
			req:   argvReq("tar", "--file=../out.tar", "-C/tmp", "--level=9", "--exclude=*.o"),
			paths: []string{"../out.tar=/out.tar vault arg@0", "/tmp=/tmp outside arg@0"},
		},
		{
			name:  "devices are host paths",
			req:   shellReq("ls > /dev/null 2>/dev/stderr"),
			paths: []string{"/dev/null=/dev/null outside redirect@0", "/dev/stderr=/dev/stderr outside redirect@0"},
		},
		{
			name: "cd in a script moves later paths",
			req:  shellReq("cat a/x; cd /etc && cat passwd; cd ~ && rm -rf .ssh; cd; ls ./y; cd \"$D\"; cat ./z; cd /src/sub; cat ../w"),
			paths: []string{
				"a/x=/src/a/x vault arg@0",
				"/etc=/etc outside arg@1", "passwd=/etc/passwd outside arg@2",
				"~=~ outside arg@3", ".ssh=~/.ssh outside arg@4",
				"./y=~/y outside arg@6",
				`"$D"="$D" unknown arg@7`, "./z=./z unknown arg@8",
				"/src/sub=/src/sub outside arg@9", "../w=/src/w outside arg@10",
			},
		},
		{
			name: "cd in a subshell or pipeline does not leak",
			req:  shellReq("(cd /etc; cat a); cat ./b; cd /tmp | cat ./c; cd .. && cat ./d"),
			paths: []string{
				"/etc=/etc outside arg@0", "a=/etc/a outside arg@1",
				"./b=/src/b vault arg@2",
				"/tmp=/tmp outside arg@3", "./c=/src/c vault arg@4",
				"..=/ vault arg@5", "./d=/d vault arg@6",
			},
		},
		{
			name:  "PWD is the working directory",
			req:   shellReq(`cat "$PWD/a" ${PWD}/../b`),
			paths: []string{`"$PWD/a"="$PWD/a" unknown arg@0`, "${PWD}/../b=/b vault arg@0"},
		},
		{
			name:  "redirect targets are always paths",
			req:   shellReq("echo hi > notes; cat < /etc/hosts; echo > \"$(mktemp)\""),
			paths: []string{"notes=/src/notes vault redirect@0", "/etc/hosts=/etc/hosts outside redirect@1", `"$(mktemp)"="$(mktemp)" unknown redirect@2`},
		},
	})
}

// nsSandbox is input.sandbox of a run in namespaces with HOME home, as
// sandbox.Input builds it.
func nsSandbox(home string) wire.SandboxInput {
	return wire.SandboxInput{Mode: wire.SandboxNamespaces, Workspace: "/workspace", Home: home,
		ReadOnlySystem: []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/etc"},
		Scratch:        []string{"/tmp", "/dev", "/proc", home}}
}

// inSandbox is req held in namespaces with HOME /root.
func inSandbox(req ParseRequest) ParseRequest {
	req.Sandbox = nsSandbox("/root")
	return req
}

// TestParsePathsSandbox: what paths name in the view of a sandbox, and
// without one when the vault is at a fixed host directory.
func TestParsePathsSandbox(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "the workspace is the vault",
			req:  inSandbox(argvReq("cat", "/workspace/src/a", "/workspace", "/workspace/", "/workspace/../etc/passwd", "/workspacex/y", "file:///workspace/b")),
			paths: []string{
				"/workspace/src/a=/src/a vault arg@0",
				"/workspace=/ vault arg@0",
				"/workspace/=/ vault arg@0",
				"/workspace/../etc/passwd=/etc/passwd read_only_system arg@0",
				"/workspacex/y=/workspacex/y outside arg@0",
				"file:///workspace/b=/b vault arg@0",
			},
		},
		{
			name:  "relative paths stay vault paths",
			req:   inSandbox(argvReq("cat", "a", "../b", "../../x")),
			paths: []string{"a=/src/a vault arg@0", "../b=/b vault arg@0", "../../x=/../x outside arg@0"},
		},
		{
			name: "home is the private home",
			req:  inSandbox(argvReq("cat", "~", "~/x", "$HOME/y", "${HOME}", "~bob/x", "~bob")),
			paths: []string{
				"~=~ scratch arg@0", "~/x=~/x scratch arg@0", "$HOME/y=~/y scratch arg@0", "${HOME}=~ scratch arg@0",
				"~bob/x=~bob/x outside arg@0", "~bob=~bob outside arg@0",
			},
		},
		{
			name: "scratch, system and outside",
			req: inSandbox(argvReq("cat", "/tmp/x", "/tmp", "/dev/null", "/proc/self/status", "/root/.bashrc", "/rootx",
				"/usr/share/x", "/etc/hosts", "/bin/sh", "/lib64/ld.so", "/opt", "/var/log/x", "/home/u/x", "/", "/tmpx")),
			paths: []string{
				"/tmp/x=/tmp/x scratch arg@0", "/tmp=/tmp scratch arg@0", "/dev/null=/dev/null scratch arg@0",
				"/proc/self/status=/proc/self/status scratch arg@0", "/root/.bashrc=/root/.bashrc scratch arg@0",
				"/rootx=/rootx outside arg@0",
				"/usr/share/x=/usr/share/x read_only_system arg@0", "/etc/hosts=/etc/hosts read_only_system arg@0",
				"/bin/sh=/bin/sh read_only_system arg@0", "/lib64/ld.so=/lib64/ld.so read_only_system arg@0",
				"/opt=/opt read_only_system arg@0",
				"/var/log/x=/var/log/x outside arg@0", "/home/u/x=/home/u/x outside arg@0", "/=/ outside arg@0",
				"/tmpx=/tmpx outside arg@0",
			},
		},
		{
			name:  "words known only at run time",
			req:   inSandbox(shellReq(`cat "$D/x" > "$(mktemp)"`)),
			paths: []string{`"$D/x"="$D/x" unknown arg@0`, `"$(mktemp)"="$(mktemp)" unknown redirect@0`},
		},
		{
			name: "cd moves between vault, scratch, system and home",
			req: inSandbox(shellReq("cd /workspace/src && cat a; cd /tmp && cat b ../usr/c; cd ~ && cat d; cd; cat e; " +
				"cd /usr && cat f; cd / && cd workspace && cat g; cd ~bob && cat h; cd /tmp && cd .. && cat i")),
			paths: []string{
				"/workspace/src=/src vault arg@0", "a=/src/a vault arg@1",
				"/tmp=/tmp scratch arg@2", "b=/tmp/b scratch arg@3", "../usr/c=/usr/c read_only_system arg@3",
				"~=~ scratch arg@4", "d=~/d scratch arg@5",
				"e=~/e scratch arg@7",
				"/usr=/usr read_only_system arg@8", "f=/usr/f read_only_system arg@9",
				"/=/ outside arg@10", "workspace=/ vault arg@11", "g=/g vault arg@12",
				"~bob=~bob outside arg@13", "h=~bob/h outside arg@14",
				"/tmp=/tmp scratch arg@15", "..=/ outside arg@16", "i=/i outside arg@17",
			},
		},
		{
			name:  "env -C into scratch",
			req:   inSandbox(argvReq("env", "-C", "/tmp", "cat", "x")),
			paths: []string{"/tmp=/tmp scratch arg@0", "x=/tmp/x scratch arg@0"},
		},
		{
			name:  "a home of / names no absolute path",
			req:   ParseRequest{Argv: []string{"cat", "/x", "~/y", "/tmp/z"}, Sandbox: nsSandbox("/")},
			paths: []string{"/x=/x outside arg@0", "~/y=~/y scratch arg@0", "/tmp/z=/tmp/z scratch arg@0"},
		},
		{
			name: "no sandbox: the mount directory is the vault",
			req: ParseRequest{Argv: []string{"cat", "/mnt/v/a", "/mnt/v", "/tmp/x", "~/y", "/usr/z", "a", "/mnt/vx"},
				Sandbox: wire.SandboxInput{Mode: wire.SandboxNone, Workspace: "/mnt/v/"}},
			paths: []string{
				"/mnt/v/a=/a vault arg@0", "/mnt/v=/ vault arg@0", "/tmp/x=/tmp/x outside arg@0", "~/y=~/y outside arg@0",
				"/usr/z=/usr/z outside arg@0", "a=/src/a vault arg@0", "/mnt/vx=/mnt/vx outside arg@0",
			},
		},
		{
			name: "no sandbox: the view's lists name nothing",
			req: ParseRequest{Argv: []string{"cat", "/tmp/x", "/usr/y", "~/z", "/"},
				Sandbox: wire.SandboxInput{Mode: wire.SandboxNone, Workspace: "/", ReadOnlySystem: []string{"/usr"}, Scratch: []string{"/tmp"}}},
			paths: []string{"/tmp/x=/tmp/x outside arg@0", "/usr/y=/usr/y outside arg@0", "~/z=~/z outside arg@0", "/=/ outside arg@0"},
		},
		{
			name: "the longest directory wins",
			req: ParseRequest{Argv: []string{"cat", "/tmp/ws/a", "/tmp/b", "/usr/local/c", "/usr/d"},
				Sandbox: wire.SandboxInput{Mode: wire.SandboxNamespaces, Workspace: "/tmp/ws", ReadOnlySystem: []string{"/usr"}, Scratch: []string{"/usr/local", "/tmp"}}},
			paths: []string{"/tmp/ws/a=/a vault arg@0", "/tmp/b=/tmp/b scratch arg@0", "/usr/local/c=/usr/local/c scratch arg@0", "/usr/d=/usr/d read_only_system arg@0"},
		},
		{
			name: "on a tie the read-only system wins",
			req: ParseRequest{Argv: []string{"cat", "/x/a", "/y/b"},
				Sandbox: wire.SandboxInput{Mode: wire.SandboxNamespaces, Workspace: "/y", ReadOnlySystem: []string{"/x"}, Scratch: []string{"/x", "/y"}}},
			paths: []string{"/x/a=/x/a read_only_system arg@0", "/y/b=/b vault arg@0"},
		},
	})
}

// TestParseSandboxInput: input.sandbox is the request's, an empty mode
// is none, and the lists are never null.
func TestParseSandboxInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		give wire.SandboxInput
		want wire.SandboxInput
	}{
		{"zero is none", wire.SandboxInput{}, wire.SandboxInput{Mode: wire.SandboxNone, ReadOnlySystem: []string{}, Scratch: []string{}}},
		{"none with a reason", wire.SandboxInput{Mode: wire.SandboxNone, Reason: "--sandbox none", Workspace: "/mnt/v", Home: "/home/u"},
			wire.SandboxInput{Mode: wire.SandboxNone, Reason: "--sandbox none", Workspace: "/mnt/v", Home: "/home/u", ReadOnlySystem: []string{}, Scratch: []string{}}},
		{"namespaces", nsSandbox("/root"), nsSandbox("/root")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Parse(context.Background(), ParseRequest{Argv: []string{"ls"}, PathEnv: "/nonexistent", Sandbox: tc.give})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(in.Sandbox)
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Errorf("sandbox = %s, want %s", got, want)
			}
		})
	}
}

func TestParseRequestFields(t *testing.T) {
	bin := fakePathDir(t)
	in, err := Parse(context.Background(), ParseRequest{
		Argv:    []string{"ls"},
		Env:     []string{"PATH", "HOME", "SECRET=hunter2", "HOME", ""},
		PathEnv: bin,
		Vault:   wire.VaultInput{Name: "v", Files: 3},
		Request: wire.RequestInput{TimeoutMS: 5, Readonly: true, ApprovalID: "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if in.Cwd != "/" {
		t.Errorf("cwd = %q, want /", in.Cwd)
	}
	if !slices.Equal(in.Env, []string{"HOME", "PATH", "SECRET"}) {
		t.Errorf("env = %q", in.Env)
	}
	if in.Vault.Name != "v" || in.Vault.Files != 3 || in.Request.ApprovalID != "a" || !in.Request.Readonly || in.Request.TimeoutMS != 5 {
		t.Errorf("vault %+v request %+v", in.Vault, in.Request)
	}
	data, _ := json.Marshal(in)
	if strings.Contains(string(data), "hunter2") {
		t.Errorf("an env value reached the document: %s", data)
	}
	in, err = Parse(context.Background(), ParseRequest{Argv: []string{"ls"}, Cwd: "src/../x/", PathEnv: bin})
	if err != nil || in.Cwd != "/x" {
		t.Errorf("cwd = %q, %v", in.Cwd, err)
	}
}

func TestParseUsesOSPath(t *testing.T) {
	bin := fakePathDir(t)
	t.Setenv("PATH", bin)
	in, err := Parse(context.Background(), ParseRequest{Argv: []string{"curl"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(bin, "curl"); in.Command.ProgramPath != want {
		t.Errorf("program_path = %q, want %q", in.Command.ProgramPath, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  ParseRequest
		msg  string
	}{
		{"neither", ParseRequest{}, "empty command"},
		{"empty argv", ParseRequest{Argv: []string{}}, "empty command"},
		{"both", ParseRequest{Argv: []string{"ls"}, Shell: "ls"}, "not both"},
		{"empty program", ParseRequest{Argv: []string{"", "x"}}, "empty command"},
		{"blank script", ParseRequest{Shell: " \n\t"}, "empty command"},
		{"invalid utf-8 argv", ParseRequest{Argv: []string{"ls", "a\xffb"}}, "argument 1 is not valid UTF-8"},
		{"invalid utf-8 script", ParseRequest{Shell: "ls \xc3"}, "not valid UTF-8"},
		{"invalid utf-8 cwd", ParseRequest{Argv: []string{"ls"}, Cwd: "/\xff"}, "not valid UTF-8"},
		{"nul argv", ParseRequest{Argv: []string{"ls\x00"}}, "NUL"},
		{"nul script", ParseRequest{Shell: "ls\x00"}, "NUL"},
		{"too long word", ParseRequest{Argv: []string{"ls", strings.Repeat("a", maxWordBytes+1)}}, "argument 1 is longer than"},
		{"too long argv", ParseRequest{Argv: slices.Repeat([]string{strings.Repeat("a", maxWordBytes)}, 9)}, "command is longer than"},
		{"too long script", ParseRequest{Shell: strings.Repeat("a", maxWordBytes+1)}, "longer than"},
		{"unknown sandbox mode", ParseRequest{Argv: []string{"ls"}, Sandbox: wire.SandboxInput{Mode: "chroot"}}, `unknown sandbox mode "chroot"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Parse(context.Background(), tc.req)
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", in)
			}
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != wire.CodeInvalidInput {
				t.Fatalf("error %#v is not an invalid_input *wire.Error", err)
			}
			if !strings.HasPrefix(err.Error(), "parse command: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want it to contain %q", err, tc.msg)
			}
		})
	}
}

func TestParseCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Parse(ctx, ParseRequest{Argv: []string{"ls"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		err  string
	}{
		{line: "ls -la /tmp", want: []string{"ls", "-la", "/tmp"}},
		{line: `echo "a b" 'c d' e\ f ""`, want: []string{"echo", "a b", "c d", "e f", ""}},
		{line: "  git   status  ", want: []string{"git", "status"}},
		{line: "echo a#b # comment", want: []string{"echo", "a#b"}},
		{line: `sh -c "curl x | sh"`, want: []string{"sh", "-c", "curl x | sh"}},
		{line: `echo "unterminated`, err: "unterminated quote"},
		{line: `echo 'unterminated`, err: "unterminated quote"},
		{line: `echo trailing\`, err: "trailing backslash"},
		{line: "", err: "empty command"},
		{line: "   # only a comment", err: "empty command"},
		{line: "ls \xff", err: "not valid UTF-8"},
		{line: "ls \x00", err: "NUL"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := ParseLine(tc.line)
			if tc.err != "" {
				var we *wire.Error
				if !errors.As(err, &we) || we.Code != wire.CodeInvalidInput || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseLine = %q, %v; want invalid_input %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("ParseLine = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// BenchmarkParse measures the hot path: one argv command, and an sh -c
// pipeline with a substitution and redirects.
func BenchmarkParse(b *testing.B) {
	bin := fakePathDir(b)
	for _, bc := range []struct {
		name string
		req  ParseRequest
	}{
		{"argv", ParseRequest{Argv: []string{"git", "commit", "-am", "fix: parser", "--author=me <me@x>", "./src/a.go"}}},
		{"wrapped", ParseRequest{Argv: []string{"sudo", "-u", "bob", "env", "A=1", "timeout", "5", "curl", "-sSL", "https://x.io/a"}}},
		{"sh-c-pipeline", ParseRequest{Argv: []string{"bash", "-c", `find . -name '*.go' | xargs grep -l "$(cat pattern)" > out.txt && echo done`}}},
	} {
		bc.req.Cwd, bc.req.PathEnv = "/src", bin+":/usr/bin:/bin"
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if _, err := Parse(ctx, bc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
