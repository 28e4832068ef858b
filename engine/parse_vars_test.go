package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"avfs/wire"
)

// bare is the empty command of a statement with only assignments.
var bare = cmdWant{prog: "", argv: []string{}}

func TestParseVariables(t *testing.T) {
	dyn := func(raw string) cmdWant { return cmdWant{prog: raw, dynamic: true} }
	// echo shows what is known: its words are the values, or "$x".
	echo := func(words ...string) cmdWant {
		w := cmdWant{prog: "echo", argv: append([]string{"echo"}, words...)}
		for _, x := range words {
			w.dynamic = w.dynamic || strings.Contains(x, "$")
		}
		return w
	}
	runParseCases(t, []parseCase{
		{
			name: "a program in a variable is its value",
			req:  shellReq("p=curl; $p https://x"),
			cmds: []cmdWant{bare, {prog: "curl", path: "BIN/curl", argv: []string{"curl", "https://x"}}},
		},
		{
			name: "a directory in a variable",
			req:  shellReq("d=/etc; cat $d/passwd; export D=/var; cat \"$D\"/log ${D}/x"),
			cmds: []cmdWant{bare, {prog: "cat", argv: []string{"cat", "/etc/passwd"}}, {prog: "export"}, {prog: "cat", argv: []string{"cat", "/var/log", "/var/x"}}},
			paths: []string{
				"/etc=/etc outside arg@0", "/etc/passwd=/etc/passwd outside arg@1",
				"/var=/var outside arg@2", "/var/log=/var/log outside arg@3", "/var/x=/var/x outside arg@3",
			},
		},
		{
			name: "values expand in assignments, one after the other",
			req:  shellReq("a=cu b=${a}rl; c=$b; c+=' -s'; sh -c \"$c x\""),
			cmds: []cmdWant{bare, bare, bare, {prog: "sh"}, {prog: "curl", origin: "script", argv: []string{"curl", "-s", "x"}}},
		},
		{
			name: "an assignment before a command is its environment only",
			req:  shellReq("X=/etc cat $X/passwd; Y=1 Z=$Y env"),
			cmds: []cmdWant{
				{prog: "cat", dynamic: true, assigns: map[string]string{"X": "/etc"}, argv: []string{"cat", "$X/passwd"}},
				{prog: "env", assigns: map[string]string{"Y": "1", "Z": "1"}},
			},
			paths: []string{"/etc=/etc outside arg@0", "$X/passwd=$X/passwd unknown arg@0"},
		},
		{
			name: "before a special builtin it may stay",
			req:  shellReq("p=ls; p=curl :; echo $p"),
			cmds: []cmdWant{bare, {prog: ":"}, echo("$p")},
		},
		{
			name: "subshells, substitutions and pipeline elements keep their assignments",
			req:  shellReq("p=ls; (p=curl); x=$(p=curl); true | p=wget | true; echo $p"),
			cmds: []cmdWant{bare, bare, {prog: "", dynamic: true}, bare, {prog: "true"}, bare, {prog: "true"}, echo("ls")},
		},
		{
			name: "the last pipeline element may run in the shell",
			req:  shellReq("p=ls; true | p=curl; echo $p"),
			cmds: []cmdWant{bare, {prog: "true"}, bare, echo("$p")},
		},
		{
			name: "a background statement runs in a subshell",
			req:  shellReq("p=ls; p=curl & echo $p"),
			cmds: []cmdWant{bare, bare, echo("ls")},
		},
		{
			name: "branches make what they assign unknown unless all agree",
			req: shellReq(`p=ls; if c; then p=curl; fi; echo $p
q=ls; if c; then q=ls; else q=ls; fi; echo $q
r=ls; c && r=wget; echo $r
case $x in a) s=curl;; *) s=ls;; esac; echo $s
t=ls; case $x in a) t=curl;& b) echo $t;; esac
u=ls; if c; then u=x; elif d; then :; else u=y; fi; echo $u`),
			cmds: []cmdWant{
				bare, {prog: "c"}, bare, echo("$p"),
				bare, {prog: "c"}, bare, bare, echo("ls"),
				bare, {prog: "c"}, bare, echo("$r"),
				bare, bare, echo("$s"),
				bare, bare, echo("$t"),
				bare, {prog: "c"}, bare, {prog: "d"}, {prog: ":"}, bare, echo("$u"),
			},
		},
		{
			name: "a loop printing values forgets nothing",
			req:  shellReq("p=ls; while c; do printf '%s\\n' \"$x\"; done; echo $p"),
			cmds: []cmdWant{bare, {prog: "c"}, {prog: "printf", dynamic: true}, echo("ls")},
		},
		{
			name: "loops make what they assign unknown, before and after",
			req:  shellReq("p=ls; while c; do echo $p; p=curl; echo $p; done; echo $p; for i in $(x); do q=ls; echo $q; done; echo $q"),
			cmds: []cmdWant{
				bare, {prog: "c"}, echo("$p"), bare, echo("curl"), echo("$p"),
				{prog: "x", origin: "substitution"}, bare, echo("ls"), echo("$q"),
			},
		},
		{
			name: "read, unset, getopts, printf -v and arithmetic assign",
			req:  shellReq("a=ls b=ls c=ls d=ls e=ls f=ls; read a; unset b; getopts x: c; printf -v d %s x; ((e++)); let f=1; echo $a $b $c $d $e $f"),
			cmds: []cmdWant{
				bare, {prog: "read"}, {prog: "unset"}, {prog: "getopts"}, {prog: "printf"},
				echo("$a", "$b", "$c", "$d", "$e", "$f"),
			},
		},
		{
			name: "assignments in expansions",
			req:  shellReq("p=; : ${p:=curl}; q=ls; : $((q=1)); y='r=7' r=ls; ((y)); echo $p $q $r"),
			cmds: []cmdWant{bare, dyn(":"), bare, dyn(":"), bare, echo("$p", "$q", "$r")},
		},
		{
			name: "an integer is evaluated as itself",
			req:  shellReq("n=3 p=ls; ((n > 1)); echo $p"),
			cmds: []cmdWant{bare, echo("ls")},
		},
		{
			name: "a function body runs later: what it assigns is never known again",
			req:  shellReq("f(){ p=curl; echo $q; }; p=ls q=ls; f; echo $p $q"),
			cmds: []cmdWant{bare, echo("$q"), bare, {prog: "f"}, echo("$p", "ls")},
		},
		{
			name: "a function evaluating arithmetic may assign anything when called",
			req:  shellReq("f(){ ((x)); }; p=ls; echo $p; f; echo $p"),
			cmds: []cmdWant{bare, echo("ls"), {prog: "f"}, echo("$p")},
		},
		{
			name: "a trap on a signal ends what is known, one at exit does not",
			req:  shellReq("trap 'rm -f x' EXIT; q=ls; echo $q; trap - INT; trap '' TERM; echo $q; trap 'p=curl' DEBUG; echo $q"),
			cmds: []cmdWant{
				{prog: "trap"}, {prog: "rm", origin: "eval"}, bare, echo("ls"), {prog: "trap"}, {prog: "trap"}, echo("ls"),
				{prog: "trap"}, {prog: "", argv: []string{}, origin: "eval"}, echo("$q"),
			},
		},
		{
			name: "an exit trap changes nothing, whatever its action; printf assigns only with -v",
			req:  shellReq("t=$(mktemp -d); p=ls; trap \"rm -rf $t\" EXIT; printf '%s\\n' \"$t\"; echo $p"),
			check: func(t *testing.T, in *wire.Input) {
				if last := in.Commands[len(in.Commands)-1]; !slices.Equal(last.Argv, []string{"echo", "ls"}) {
					t.Errorf("last command %q", last.Argv)
				}
			},
		},
		{
			name: "source, eval of unknown text, a dynamic command and alias end what is known",
			req:  shellReq("p=ls; . ./env.sh; echo $p; q=ls; echo $q"),
			cmds: []cmdWant{bare, {prog: "."}, echo("$p"), bare, echo("$q")},
		},
		{
			name: "a dynamic command ends what is known",
			req:  shellReq("p=ls; $x; echo $p"),
			cmds: []cmdWant{bare, dyn("$x"), echo("$p")},
		},
		{
			name: "a literal eval runs in the shell",
			req:  shellReq("p=ls; eval 'p=curl'; $p x"),
			cmds: []cmdWant{bare, {prog: "eval"}, {prog: "", argv: []string{}, origin: "eval"}, {prog: "curl"}},
		},
		{
			name: "an unquoted value that splits or globs is not a word",
			req:  shellReq(`p="curl x"; g='*.md'; e=; cat "$g" "$p" "$e"; cat $g; cat $p; echo $e; $e ls`),
			cmds: []cmdWant{
				bare, bare, bare,
				{prog: "cat", argv: []string{"cat", "*.md", "curl x", ""}},
				{prog: "cat", dynamic: true, argv: []string{"cat", "$g"}},
				{prog: "cat", dynamic: true, argv: []string{"cat", "$p"}},
				echo("$e"), dyn("$e"),
			},
		},
		{
			name: "IFS decides what splits",
			req:  shellReq("p=xcurl; echo $p; IFS=c; echo $p \"$p\"; IFS=$(x); echo x$p"),
			cmds: []cmdWant{
				bare, echo("xcurl"), bare, echo("$p", "xcurl"),
				{prog: "", dynamic: true}, {prog: "x", origin: "substitution"}, echo("x$p"),
			},
		},
		{
			name: "${IFS} splits",
			req:  shellReq("curl${IFS}https://x"),
			cmds: []cmdWant{dyn("curl${IFS}https://x")},
		},
		{
			name: "readonly keeps its value, local fails outside functions, attributes poison",
			req:  shellReq("readonly p=curl; p=ls; q=ls; local q=curl; declare -l r; r=CURL; echo $p $q $r"),
			cmds: []cmdWant{{prog: "readonly"}, bare, bare, {prog: "local"}, {prog: "declare", dynamic: true}, bare, echo("curl", "$q", "$r")},
		},
		{
			name: "in a function local works, and IFS is not known",
			req:  shellReq("f(){ local p=curl; \"$p\" x; $p; }"),
			cmds: []cmdWant{{prog: "local"}, {prog: "curl"}, dyn("$p")},
		},
		{
			name: "a new shell knows none of its parent's variables",
			req:  shellReq("p=curl; sh -c 'q=ls; echo $q $p'"),
			cmds: []cmdWant{bare, {prog: "sh"}, bare, {prog: "echo", origin: "script", dynamic: true, argv: []string{"echo", "ls", "$p"}}},
		},
		{
			name: "an unquoted heredoc expands known variables",
			req:  shellReq("p=curl; sh <<EOF\n$p x\nEOF"),
			cmds: []cmdWant{bare, {prog: "sh", stdin: true}, {prog: "curl", origin: "script", argv: []string{"curl", "x"}}},
		},
		{
			name: "shells that may run code first know nothing",
			req:  shellReq("export -f f; bash -c 'p=ls; echo $p'; BASH_ENV=x.sh sh -c 'q=ls; echo $q'"),
			cmds: []cmdWant{
				{prog: "export", dynamic: true}, {prog: "bash"}, bare, {prog: "echo", dynamic: true},
				{prog: "sh", assigns: map[string]string{"BASH_ENV": "x.sh"}}, bare, {prog: "echo", dynamic: true},
			},
		},
		{
			name: "an environment with BASH_ENV knows nothing",
			req:  ParseRequest{Shell: "p=ls; echo $p", Env: []string{"BASH_ENV=x", "HOME"}},
			cmds: []cmdWant{bare, echo("$p")},
		},
		{
			name: "an environment with bash options knows nothing",
			req:  ParseRequest{Shell: "p=ls; echo $p", Env: []string{"BASHOPTS"}},
			cmds: []cmdWant{bare, echo("$p")},
		},
		{
			name: "a nameref makes any name stand for another",
			req:  shellReq("p=ls; declare -n r=p; r=curl; echo $p; f(){ local -n s=$1; s=curl; }; q=ls; echo $q"),
			cmds: []cmdWant{bare, {prog: "declare", dynamic: false}, bare, echo("$p"), {prog: "local", dynamic: true}, bare, bare, echo("$q")},
		},
		{
			name: "declare -x and -r change no value",
			req:  shellReq("declare -x d=/etc; declare -r e=/var; e=/tmp; cat $d/x $e/y"),
			cmds: []cmdWant{{prog: "declare"}, {prog: "declare"}, bare, {prog: "cat", argv: []string{"cat", "/etc/x", "/var/y"}}},
		},
		{
			name: "a first word that looks like an assignment is the program",
			req:  shellReq("x=Y=2; $x ls; 'X=1' ls; {Z=3,ls}"),
			cmds: []cmdWant{bare, {prog: "Y=2", dynamic: true}, {prog: "X=1", dynamic: true}, {prog: "Z=3", dynamic: true}},
		},
		{
			name: "fish and csh scripts have no table",
			req:  shellReq("fish -c 'p=ls; echo $p'"),
			cmds: []cmdWant{{prog: "fish"}, bare, {prog: "echo", dynamic: true}},
		},
	})
}

// TestParseMovedHome: a script that assigns HOME or PWD moves ~, $HOME
// and $PWD away from the home and working directory.
func TestParseMovedHome(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   []string // "arg=path where" of the paths that are not f
	}{
		{"HOME=$(cat f); cat $HOME/x ~/y \"$HOME\"/z ~bob/w", []string{"$HOME/x=$HOME/x unknown", "~/y=~/y unknown", `"$HOME"/z="$HOME"/z unknown`, "~bob/w=~bob/w outside"}},
		{"HOME=/var; cat ~/x $HOME/y", []string{"/var=/var outside", "/var/x=/var/x outside", "/var/y=/var/y outside"}},
		{"cat ~/x $HOME/y", []string{"~/x=~/x scratch", "$HOME/y=~/y scratch"}},
		{"PWD=$(cat f); cat $PWD/x; cd src; cat $PWD/y", []string{"$PWD/x=$PWD/x unknown", "src=/src/src vault", "$PWD/y=/src/src/y vault"}},
		{"HOME=$(cat f) sh -c 'cat ~/x'; sh -c 'cat ~/y'", []string{"~/x=~/x unknown", "~/y=~/y scratch"}},
		{"export HOME=/var; bash -c 'cat ~/x'; read HOME; sh -c 'cat ~/y'", []string{"/var=/var outside", "/var/x=/var/x outside", "~/y=~/y unknown"}},
	} {
		in, err := Parse(context.Background(), ParseRequest{Shell: tc.script, Cwd: "/src", PathEnv: "/nonexistent", Sandbox: nsSandbox("/root")})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range in.Paths {
			if p.Arg != "f" {
				got = append(got, p.Arg+"="+p.Path+" "+string(p.Where))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q:\n got  %q\n want %q", tc.script, got, tc.want)
		}
	}
}

func TestParseForLoops(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name:  "a loop over static words walks its body once per word",
			req:   shellReq("for f in a.md 'b c.md'; do cat \"$f\"; done"),
			cmds:  []cmdWant{{prog: "cat", argv: []string{"cat", "a.md"}}, {prog: "cat", argv: []string{"cat", "b c.md"}}},
			paths: []string{"a.md=/src/a.md vault arg@0", "b c.md=/src/b c.md vault arg@1"},
		},
		{
			name: "a loop over programs",
			req:  shellReq("for p in ls curl; do $p x; done"),
			cmds: []cmdWant{{prog: "ls"}, {prog: "curl"}},
		},
		{
			name: "a loop over a glob binds the pattern",
			req:  shellReq("for f in *.md; do cat \"$f\"; cat $f; \"$f\" x; done"),
			cmds: []cmdWant{
				{prog: "cat", argv: []string{"cat", "*.md"}},
				{prog: "cat", dynamic: true, argv: []string{"cat", "$f"}},
				{prog: "*.md", dynamic: true, argv: []string{"*.md", "x"}},
			},
			paths: []string{"*.md=/src/*.md vault arg@0", "$f=$f unknown arg@1"},
		},
		{
			name:  "a glob that may reach .. stays unknown",
			req:   shellReq("for f in .* ../*; do rm -rf \"$f\"/x; done"),
			paths: []string{".*/x=.*/x unknown arg@0", "../*/x=/*/x vault arg@1"},
		},
		{
			name: "the loop variable is unknown after the loop",
			req:  shellReq("for f in a; do :; done; cat \"$f\""),
			cmds: []cmdWant{{prog: ":"}, {prog: "cat", dynamic: true}},
		},
		{
			name: "too many words, or words not static, walk the body once",
			req:  shellReq("for f in $(ls); do cat \"$f\"; done; for i in {1..17}; do echo $i; done"),
			cmds: []cmdWant{{prog: "ls", origin: "substitution"}, {prog: "cat", dynamic: true}, {prog: "echo", dynamic: true}},
		},
		{
			name: "what the body assigns is unknown at its start",
			req:  shellReq("p=ls; for i in 1 2; do $p; p=curl; done"),
			cmds: []cmdWant{bare, {prog: "$p", dynamic: true}, bare, {prog: "$p", dynamic: true}, bare},
		},
		{
			name: "a function defined in a loop poisons what it assigns for the whole loop",
			req:  shellReq("while c; do p=ls; f; $p; f(){ p=curl; }; done"),
			cmds: []cmdWant{{prog: "c"}, bare, {prog: "f"}, {prog: "$p", dynamic: true}, bare},
		},
		{
			name: "select binds nothing",
			req:  shellReq("select f in a b; do cat \"$f\"; done"),
			cmds: []cmdWant{{prog: "cat", dynamic: true}},
		},
	})
}

// TestParseLoopLimits: nested loops over static words are walked within
// maxUnrollNodes.
func TestParseLoopLimits(t *testing.T) {
	words := strings.Repeat("a ", maxLoopWords)
	src := "for a in " + words + "; do for b in " + words + "; do for c in " + words + "; do for d in " + words + "; do " +
		strings.Repeat("x \"$a$b$c$d\"; ", 64) + "done; done; done; done"
	in, err := Parse(context.Background(), ParseRequest{Shell: src, PathEnv: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(in.Commands); n > maxUnrollNodes || n < 64 {
		t.Errorf("%d commands", n)
	}
}

func TestParseBraces(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "a brace program",
			req:  shellReq("{wget,-q,https://x}"),
			cmds: []cmdWant{{prog: "wget", path: "BIN/wget", argv: []string{"wget", "-q", "https://x"}, flags: []string{"-q"}}},
		},
		{
			name: "brace globs",
			req:  shellReq("wc -l src/*.{go,md} {a,b}{1..2}"),
			cmds: []cmdWant{{prog: "wc", argv: []string{"wc", "-l", "src/*.go", "src/*.md", "a1", "a2", "b1", "b2"}}},
		},
		{
			name: "braces with known variables, quotes and escapes",
			req:  shellReq("d=/etc; cat {$d,x}/passwd '{a,b}' \\{c,d} {'e f',g}"),
			cmds: []cmdWant{bare, {prog: "cat", argv: []string{"cat", "/etc/passwd", "x/passwd", "{a,b}", "{c,d}", "e f", "g"}}},
		},
		{
			name: "braces that are not static stay one word",
			req:  shellReq("{$x,-q} y; echo {1..257}; echo {a,$(b)}"),
			cmds: []cmdWant{
				{prog: "{$x,-q}", dynamic: true},
				{prog: "echo", dynamic: true, argv: []string{"echo", "{1..257}"}},
				{prog: "echo", dynamic: true}, {prog: "b", origin: "substitution"},
			},
		},
		{
			name: "no brace expansion in assignments",
			req:  shellReq("x={a,b}; cat \"$x\""),
			cmds: []cmdWant{{prog: "", argv: []string{}, dynamic: true}, {prog: "cat", dynamic: true}},
		},
	})
}

// TestParseBraceLimits: brace expansions give at most maxBraceTotal words
// in one Parse.
func TestParseBraceLimits(t *testing.T) {
	src := strings.Repeat("echo {a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}; ", 40)
	in, err := Parse(context.Background(), ParseRequest{Shell: src, PathEnv: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	words, dynamic := 0, 0
	for _, c := range in.Commands {
		words += len(c.Args)
		if c.Dynamic {
			dynamic++
		}
	}
	if words > maxBraceTotal+40 || dynamic == 0 {
		t.Errorf("%d words, %d dynamic commands", words, dynamic)
	}
}

func TestParseGlobPrograms(t *testing.T) {
	bin := fakePathDir(t)
	old := globDirs
	globDirs = append([]string{bin}, globDirs...)
	t.Cleanup(func() { globDirs = old })
	for _, tc := range []struct {
		script  string
		program string
		dynamic bool
	}{
		{"BIN/wge? x", "wget", false},
		{"BIN/[c]url x", "curl", false},
		{"BIN/c[!h]t x", "cat", false},
		{"env BIN/nohu? BIN/cur? x", "curl", false},
		{"BIN/c* x", "BIN/c*", true},         // several
		{"BIN/zz* x", "BIN/zz*", true},       // none
		{"BIN/noex?c x", "BIN/noex?c", true}, // not executable
		{"./ru? x", "./ru?", true},           // in the vault
		{"BIN/'c'?t x", "cat", false},        // a quoted c is a c
		{"BIN/'?'a* x", "BIN/?a*", true},     // a quoted ? is no pattern: not matched
		{"shopt -s nocaseglob; BIN/WGE? x", "BIN/WGE?", true},
	} {
		script := strings.ReplaceAll(tc.script, "BIN", bin)
		in, err := Parse(context.Background(), ParseRequest{Shell: script, PathEnv: bin})
		if err != nil {
			t.Fatal(err)
		}
		c := in.Commands[len(in.Commands)-1]
		want := strings.ReplaceAll(tc.program, "BIN", bin)
		if c.Program != want || c.Dynamic != tc.dynamic {
			t.Errorf("%q: program %q dynamic %v, want %q %v", tc.script, c.Program, c.Dynamic, want, tc.dynamic)
		}
	}
}

func TestParseFunctionsAndBackground(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "commands know their function and whether they run in the background",
			req:  shellReq(":(){ :& :; };:; f(){ (g | h) & }; f & coproc k"),
			check: func(t *testing.T, in *wire.Input) {
				var got []string
				for _, c := range in.Commands {
					s := c.Program + "@" + c.Function
					if c.Background {
						s += "&"
					}
					got = append(got, s)
				}
				want := []string{":@:&", ":@:", ":@", "g@f&", "h@f&", "f@&", "k@&"}
				if !slices.Equal(got, want) {
					t.Errorf("got %q, want %q", got, want)
				}
			},
		},
	})
}

// TestStaticDecisions: the default policy on scripts whose programs,
// words and piped text the parser determines statically.
func TestStaticDecisions(t *testing.T) {
	checkScriptDecisions(t, []scriptDecision{
		{"p=curl; $p https://x", wire.RequireApproval, []string{"avfs.approval.network"}},
		{"d=/var/log; cat $d/syslog", wire.Deny, []string{"avfs.deny.outside_vault"}},
		{"d=src; ls $d", wire.Allow, []string{"avfs.allow.read_only"}},
		{"for f in *.md; do cat \"$f\"; done", wire.Allow, []string{"avfs.allow.read_only"}},
		{"for f in *; do \"$f\" x; done", wire.RequireApproval, []string{"avfs.approval.dynamic_command"}},
		{"wc -l src/*.{go,md}", wire.Allow, []string{"avfs.allow.read_only"}},
		{"{wget,-q,https://x}", wire.RequireApproval, []string{"avfs.approval.network"}},
		{"cat {..,x}/etc/passwd", wire.Deny, []string{"avfs.deny.outside_vault"}},
		{"{$x,-q} y", wire.RequireApproval, []string{"avfs.approval.dynamic_command"}},
		{"curl${IFS}https://x", wire.RequireApproval, []string{"avfs.approval.dynamic_command"}},
		{"./ru? x", wire.RequireApproval, []string{"avfs.approval.dynamic_command"}},
		{":(){ :& :; };:", wire.Deny, []string{"avfs.deny.fork_bomb"}},
		{"f(){ f & f; }; f", wire.Deny, []string{"avfs.deny.fork_bomb"}},
		{"bomb() { bomb & }; bomb", wire.Deny, []string{"avfs.deny.fork_bomb"}},
		{"f(){ ls; }; f; f", wire.AllowWithCheckpoint, []string{"avfs.checkpoint.changes"}},
	})
}

// scriptDecision is a script and the decision and reasons the default
// policy must give it, held in namespaces with home /root.
type scriptDecision struct {
	script   string
	decision wire.Decision
	reasons  []string
}

// checkScriptDecisions parses and decides every case with the default
// policy.
func checkScriptDecisions(t *testing.T, cases []scriptDecision) {
	t.Helper()
	p := defaultP(t)
	view := nsSandbox("/root")
	for _, tc := range cases {
		in, err := Parse(context.Background(), ParseRequest{Shell: tc.script, Cwd: "/", PathEnv: "/nonexistent", Sandbox: view})
		if err != nil {
			t.Fatalf("%q: %v", tc.script, err)
		}
		res, err := p.Decide(context.Background(), in, DecideOptions{})
		if err != nil || res.Decision != tc.decision || !slices.Equal(reasonIDs(res.Reasons), tc.reasons) {
			t.Errorf("%q: %s %v, want %s %v (%v)", tc.script, res.Decision, reasonIDs(res.Reasons), tc.decision, tc.reasons, err)
		}
	}
}
