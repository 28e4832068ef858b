package engine

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"avfs/wire"
)

// inputBuilder collects the commands, paths and script facts of one Parse call.
// It is not safe for concurrent use; every Parse call has its own.
type inputBuilder struct {
	ctx      context.Context
	view     *view             // what the paths name (ParseRequest.Sandbox)
	programs *Programs         // the program specs words are classified by
	pathEnv  string            // PATH that program_path is resolved on
	pathDirs []string          // pathEnv split, once needed
	lookups  map[string]string // program_path by name on pathEnv, for this call
	commands []wire.Command
	paths    []wire.Path
	script   *wire.Script // nil until a shell script is parsed
	err      error        // ctx's error, when it ended while parsing

	workspace Workspace   // ParseRequest.Workspace, nil for none
	static    staticState // what static expansion spent (parse_vars.go)
}

// shellWord is one command word. Literal words hold their value with quotes and
// escapes removed; other words ($VAR, $(…), globs in ${…}) hold their
// source text, which is what a policy can still match on.
type shellWord struct {
	text      string
	literal   bool
	subst     bool // contains a command or process substitution
	procSubst bool // is exactly one process substitution, <(…) or >(…)
	glob      bool // a pattern the shell expands to file names (unquoted *, ?, […]), or one of them
	pattern   bool // glob, and text spells the pattern exactly: it can be matched (parse_expand.go)
	rebased   bool // ~, $HOME or $PWD of a HOME or PWD the script assigned: not what paths.go takes them for
}

// envAssignment is a NAME=value given before a command.
type envAssignment struct {
	name  string
	value shellWord
}

// shellScope is where in a script a command was found.
type shellScope struct {
	src        string    // the source the syntax tree's positions refer to
	origin     string    // Origin of the simple commands found here
	depth      int       // scripts re-parsed to get here (sh -c, eval)
	dir        *dirState // the shell's working directory; cd changes it
	pipe       int       // index within the enclosing pipeline
	pipeLen    int       // length of the enclosing pipeline (1: none)
	pipeReader bool      // stdin is the output of another command
	feeds      int       // 1 + the index of the command a substitution's output goes to (wire.Command.Feeds), 0 for none
	scopeExt             // variables, function, background, piped text (parse_vars.go)
}

// cmdExtra is what a script knows about a command beyond its words.
type cmdExtra struct {
	raw     string          // the command as written
	assigns []envAssignment // shell assignments before it (FOO=1 cmd)
	redirs  []shellRedirect // its redirections
	stdin   stdinFeed       // what its redirections feed to stdin
}

// shellRedirect is one redirection and whether its target names a file.
type shellRedirect struct {
	wire   wire.Redirect
	target shellWord
	isPath bool
	role   wire.Role // read for < and <>… as input, write for every redirect that writes
}

// addCommand records one simple command found in sc: it peels off the
// wrappers, classifies the arguments, records the paths, then follows what
// the command runs in turn (sh -c scripts, eval strings, find -exec). It
// returns the command's index in b.commands.
func (b *inputBuilder) addCommand(sc *shellScope, words []shellWord, ex cmdExtra) int {
	cmd := newCommand(sc.origin)
	cmd.Raw = ex.raw
	cmd.Pipeline, cmd.PipelineLen = sc.pipe, sc.pipeLen
	cmd.Function, cmd.Background = sc.function, sc.background
	cmd.Feeds = sc.feeds - 1
	idx := len(b.commands)

	var u unwrapped
	u.unwrap(words)
	if len(u.wrappers) > 0 {
		cmd.Wrappers = u.wrappers
	}
	if u.origin != "" {
		cmd.Origin = u.origin
	}
	for _, w := range words {
		if !w.literal {
			cmd.Dynamic = true
		}
	}
	if u.words[0].glob {
		// A pattern as the program (/usr/bin/wge?, "$f" of a glob loop):
		// what runs is only known at run time.
		u.words[0].literal, cmd.Dynamic = false, true
	}
	if u.tooDeep {
		// What runs under so many wrappers is not known: the input must
		// not be allowed, so it is recorded as a script that did not parse.
		cmd.Dynamic = true
		if b.script == nil {
			b.script = newScript(ex.raw, "")
		}
		b.parseError("wrappers nested more than " + strconv.Itoa(maxWrappers) + " deep")
	}
	for _, as := range [2][]envAssignment{ex.assigns, u.assigns} {
		for _, a := range as {
			cmd.Assignments[a.name] = a.value.text
			if !a.value.literal {
				cmd.Dynamic = true
			}
		}
	}
	for _, r := range ex.redirs {
		cmd.Redirects = append(cmd.Redirects, r.wire)
	}

	// The shell's directory, and the one the program runs in (env -C).
	shellDir := *sc.dir
	runDir := shellDir
	for _, d := range u.chdirs {
		runDir = b.view.cd(runDir, d)
	}

	run := u.words
	args := run[1:]
	cmd.Argv = make([]string, len(run))
	for i, w := range run {
		cmd.Argv[i] = w.text
	}
	cmd.Args = cmd.Argv[1:]
	cmd.Program = programName(run[0])
	execWord := run[0]
	if u.execWord != nil {
		execWord = *u.execWord
	}
	pathEnv, ownPath := cmd.Assignments["PATH"]
	cmd.ProgramPath = b.lookPath(execWord, pathEnv, ownPath)

	name := ""
	if run[0].literal {
		name = cmd.Program
	}
	in := analyseInterpreter(name, args)
	if cmd.Origin == originXargs {
		// xargs appends file operands and gives the command /dev/null as
		// stdin: a shell it runs reads script files, not stdin.
		in.stdin = false
	}
	cmd.ReadsStdinScript = in.stdin

	// Paths: wrapper options first, then the program, assignments,
	// arguments, redirects.
	for _, p := range u.pathArgs {
		b.addPath(p, shellDir, sourceArg, idx)
	}
	b.programPath(run[0], runDir, idx)
	for _, as := range [2][]envAssignment{ex.assigns, u.assigns} {
		for _, a := range as {
			if looksLikePath(a.value) {
				b.addPath(a.value, shellDir, sourceArg, idx)
			}
		}
	}
	var skip []bool         // args that are not this command's own (find -exec …, flock -c …, eval code)
	var gitRuns []shellWord // shell commands git runs from its configuration
	switch name {
	case "find":
		skip = findExecWords(args)
	case "eval":
		skip = make([]bool, len(args))
		for i := range skip {
			skip[i] = true
		}
	case "trap":
		skip = trapActionWord(args)
	case "alias":
		skip = make([]bool, len(args))
		for i, a := range args {
			skip[i] = isAssignment(a.text)
		}
	case "git":
		var assigns []envAssignment
		assigns = append(append(assigns, ex.assigns...), u.assigns...)
		gitRuns, skip = gitCommands(args, assigns)
	}
	for _, k := range u.scriptArgs {
		if k > 0 && k <= len(args) {
			if skip == nil {
				skip = make([]bool, len(args))
			}
			skip[k-1] = true
		}
	}
	var nested []nestedRun
	if spec := b.programs.Lookup(name); spec != nil {
		nested = b.classifyBySpec(&cmd, spec, args, in, withTerminators(name, args, skip), runDir, idx)
	} else {
		b.classifyByShape(&cmd, args, in, skip, runDir, idx)
	}
	cmd.LocalBin = b.localBin(name, args, runDir)
	for _, r := range ex.redirs {
		if r.isPath {
			b.addRolePath(r.target, shellDir, sourceRedirect, idx, r.role)
		}
	}
	b.commands = append(b.commands, cmd)
	for _, n := range nested {
		b.runNested(sc, runDir, n, ex.raw)
	}

	// Programs fed another command's output as their program (not the
	// literal text of echo or printf before them, parsed below).
	if in.stdin && (sc.pipeReader && !ex.stdin.piped || ex.stdin.subst) || xargsRunsInput(&cmd, in, args) {
		b.pipesToShell()
	}
	if in.code >= 0 && args[in.code].subst || in.file >= 0 && args[in.file].subst {
		b.pipesToShell()
	}

	// What the command runs in turn.
	if in.shell && in.code >= 0 && args[in.code].literal {
		shell := name
		if !in.isShell {
			shell = "sh" // su -c runs the user's shell
		}
		b.runScript(sc, runDir, args[in.code].text[in.codeAt:], shell)
	}
	if in.stdin && in.isShell && ex.stdin.literal {
		// bash <<'EOF' … EOF, sh <<< 'cmd', echo cmd | sh: the shell runs the text.
		b.runScript(sc, runDir, ex.stdin.text, name)
		for _, t := range ex.stdin.alts {
			b.runScript(sc, runDir, t, name)
		}
	}
	for _, s := range u.scripts {
		if s.literal {
			b.runScript(sc, runDir, s.text, "sh")
		} else if s.subst {
			b.pipesToShell()
		}
	}
	for _, c := range gitRuns {
		b.gitConfigCommand(sc, runDir, c, ex.raw)
	}
	switch name {
	case "eval":
		b.evalArgs(sc, args)
	case "trap":
		b.trapAction(sc, cmd.Operands)
	case "alias":
		b.aliasValues(sc, args)
	case "find":
		b.findExec(sc, args, skip, runDir, ex.raw)
	case "cd", "pushd":
		if len(cmd.Operands) == 0 {
			*sc.dir = dirState{kind: dirHome, path: "~"}
		} else {
			*sc.dir = b.view.cd(runDir, operandWord(args, cmd.Operands[0]))
		}
	case "popd":
		*sc.dir = dirState{kind: dirUnknown}
	}
	return idx
}

// runScript parses src, a script a command in sc runs in a new shell
// (sh -c) working in dir. Its commands read the command's stdin.
func (b *inputBuilder) runScript(sc *shellScope, dir dirState, src, shell string) {
	b.parseScript(shellScope{origin: originScript, depth: sc.depth + 1, dir: &dir, pipeLen: 1, pipeReader: sc.pipeReader, feeds: sc.feeds}, src, shell)
}

// gitConfigCommand records a shell command git runs from its
// configuration (git -c core.pager=…, GIT_SSH_COMMAND=…), with origin
// git_config: a literal one is parsed as a script; any other is one
// command whose program is that word, dynamic, which no rule can allow
// by name.
func (b *inputBuilder) gitConfigCommand(sc *shellScope, dir dirState, c shellWord, raw string) {
	if c.literal {
		b.parseScript(shellScope{origin: originGitConfig, depth: sc.depth + 1, dir: &dir, pipeLen: 1}, c.text, "sh")
		return
	}
	if c.subst {
		b.pipesToShell()
	}
	sub := shellScope{origin: originGitConfig, depth: sc.depth + 1, dir: &dir, pipeLen: 1}
	b.addCommand(&sub, []shellWord{c}, cmdExtra{raw: raw})
}

// programPath records the program word as a path the command executes
// (source program) when it names a file of the vault or of scratch: a
// relative path (./run.sh, bin/tool: the vault, or above it), or an
// absolute one in the workspace or scratch (/tmp/x). A program found on
// PATH, or a system one (/usr/bin/env), is no path of the command's.
func (b *inputBuilder) programPath(w shellWord, dir dirState, idx int) {
	if !w.literal || strings.IndexByte(w.text, '/') < 0 {
		return
	}
	if w.text[0] == '/' {
		p, kind := b.view.resolve(dir, w)
		if where := b.view.where(p, kind); where != wire.WhereVault && where != wire.WhereScratch {
			return
		}
	}
	b.addRolePath(w, dir, sourceProgram, idx, wire.RoleExecute)
}

// runNested records what a command's words make it run (see nestedRun):
// literal shell code is parsed as a script run by sh; shell code that is
// not literal is one dynamic command named by it; an argv is a command of
// origin argument.
func (b *inputBuilder) runNested(sc *shellScope, dir dirState, n nestedRun, raw string) {
	sub := shellScope{origin: originArgument, depth: sc.depth + 1, dir: &dir, pipeLen: 1, feeds: sc.feeds}
	if n.script == nil {
		if sub.depth > maxScriptDepth {
			b.parseError("commands nested more than " + strconv.Itoa(maxScriptDepth) + " deep")
			return
		}
		b.addCommand(&sub, n.argv, cmdExtra{raw: raw})
		return
	}
	c := *n.script
	if c.literal {
		b.parseScript(sub, c.text, "sh")
		return
	}
	if c.subst {
		b.pipesToShell()
	}
	b.addCommand(&sub, []shellWord{c}, cmdExtra{raw: raw})
}

// classifyByShape fills the command's flags, flag values and operands from
// args for a program without a spec, and records every argument that has
// the shape of a path (looksLikePath), the script file of an interpreter
// with the role execute.
func (b *inputBuilder) classifyByShape(cmd *wire.Command, args []shellWord, in interpResult, skip []bool, dir dirState, idx int) {
	endOfOptions := false
	for i, a := range args {
		t := a.text
		own := skip == nil || !skip[i]
		code := in.isCode(i)
		switch {
		case endOfOptions || len(t) < 2 || t[0] != '-' || !isFlagChar(t[1]) && t[1] != '-':
			cmd.Operands = append(cmd.Operands, t)
			if own && !code {
				if i == in.file && !a.subst {
					b.addRolePath(a, dir, sourceArg, idx, wire.RoleExecute)
				} else if v, ok := assignmentValue(a); ok {
					// make DESTDIR=/x, dd if=/dev/sda: the value is the path.
					if looksLikePath(v) {
						b.addPath(v, dir, sourceArg, idx)
					}
				} else if looksLikePath(a) {
					b.addPath(a, dir, sourceArg, idx)
				}
			}
		case t == "--":
			endOfOptions = true
		case t[1] == '-':
			flag, value, hasValue := strings.Cut(t, "=")
			cmd.Flags = append(cmd.Flags, flag)
			if hasValue {
				cmd.FlagValues[flag] = value
				v := shellWord{text: value, literal: a.literal}
				if own && !code && looksLikePath(v) {
					b.addPath(v, dir, sourceArg, idx)
				}
			}
		case !a.literal:
			cmd.Flags = append(cmd.Flags, t)
		default:
			last := ""
			for j := 1; j < len(t); j++ {
				c := t[j]
				if !isFlagChar(c) {
					value := strings.TrimPrefix(t[j:], "=")
					cmd.FlagValues[last] = value
					v := shellWord{text: value, literal: true}
					if own && !code && looksLikePath(v) {
						b.addPath(v, dir, sourceArg, idx)
					}
					break
				}
				last = shortFlag(c)
				cmd.Flags = append(cmd.Flags, last)
			}
		}
	}
}

// operandWord returns the first arg whose text is op (the word an operand
// came from, with its literal flag).
func operandWord(args []shellWord, op string) shellWord {
	for _, a := range args {
		if a.text == op {
			return a
		}
	}
	return shellWord{text: op, literal: true}
}

// assignmentValue returns the value word of a NAME=value word.
func assignmentValue(a shellWord) (shellWord, bool) {
	if !isAssignment(a.text) {
		return shellWord{}, false
	}
	_, v, _ := strings.Cut(a.text, "=")
	return shellWord{text: v, literal: a.literal, subst: a.subst}, true
}

// isAssignment reports whether t is NAME=value with a shell variable name.
func isAssignment(t string) bool {
	eq := strings.IndexByte(t, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := t[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// isFlagChar reports whether c can be a short option letter.
func isFlagChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// shortFlags holds "-a" … "-Z", "-0" … "-9" so splitting "-rf" allocates nothing.
var shortFlags = func() (t [128]string) {
	for c := byte(0); c < 128; c++ {
		if isFlagChar(c) {
			t[c] = "-" + string(rune(c))
		}
	}
	return t
}()

// shortFlag returns "-" + c for a flag character c.
func shortFlag(c byte) string {
	if c >= 128 {
		return ""
	}
	return shortFlags[c]
}

// programName is the basename of a literal program word ("/usr/bin/curl"
// gives "curl"); a word that is not literal is kept as its source text.
func programName(w shellWord) string {
	if !w.literal {
		return w.text
	}
	t := w.text
	if i := strings.LastIndexByte(t, '/'); i >= 0 && i < len(t)-1 {
		return t[i+1:]
	}
	return t
}

// lookPath resolves a program word the way exec.LookPath does, against the
// request's PATH or, when ownPath, the command's own PATH=… assignment. A name containing
// a slash is kept as given: an absolute one when it is an executable file,
// a relative one always (it names a file in the vault, which the parser
// cannot see). It returns "" when nothing is found; relative PATH entries
// are ignored, like exec.ErrDot.
func (b *inputBuilder) lookPath(w shellWord, pathEnv string, ownPath bool) string {
	name := w.text
	if !w.literal || name == "" {
		return ""
	}
	if strings.IndexByte(name, '/') >= 0 {
		if name[0] != '/' || isExecutable(name) {
			return name
		}
		return ""
	}
	// Lookups on the request's PATH are remembered within a script.
	memo := !ownPath && b.script != nil
	dirs := b.pathDirs
	if ownPath {
		dirs = filepath.SplitList(pathEnv)
	} else if dirs == nil {
		dirs = filepath.SplitList(b.pathEnv)
		b.pathDirs = dirs
	}
	if memo {
		if p, ok := b.lookups[name]; ok {
			return p
		}
	}
	found := ""
	for _, dir := range dirs {
		if dir == "" || dir[0] != '/' {
			continue
		}
		if p := dir + "/" + name; isExecutable(p) {
			found = p
			break
		}
	}
	if memo {
		if b.lookups == nil {
			b.lookups = make(map[string]string, 4)
		}
		b.lookups[name] = found
	}
	return found
}

// isExecutable reports whether p is a file someone may execute.
func isExecutable(p string) bool {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return false
	}
	return st.Mode&syscall.S_IFMT != syscall.S_IFDIR && st.Mode&0o111 != 0
}

// pipesToShell records that a shell or interpreter runs another command's
// output as its program.
func (b *inputBuilder) pipesToShell() {
	if b.script != nil {
		b.script.PipesToShell = true
	}
}

// evalArgs parses the string eval runs, when every word is a literal: the
// words joined with spaces, run in the current shell.
func (b *inputBuilder) evalArgs(sc *shellScope, args []shellWord) {
	if len(args) == 0 {
		return
	}
	parts := make([]string, len(args))
	for i, a := range args {
		if !a.literal {
			if a.subst {
				b.pipesToShell()
			}
			return
		}
		parts[i] = a.text
	}
	b.parseScript(sc.evalScope(), strings.Join(parts, " "), "")
}

// trapAction parses the action of `trap ACTION SIGNAL…`, which the shell
// runs later like eval.
func (b *inputBuilder) trapAction(sc *shellScope, operands []string) {
	if len(operands) < 2 || operands[0] == "-" || strings.TrimSpace(operands[0]) == "" {
		return
	}
	dir := *sc.dir
	b.parseScript(shellScope{origin: originEval, depth: sc.depth + 1, dir: &dir, pipeLen: 1}, operands[0], "")
}

// trapActionWord marks the action of `trap ACTION SIGNAL…` (shell code,
// not a path).
func trapActionWord(args []shellWord) []bool {
	for i, a := range args {
		if !strings.HasPrefix(a.text, "-") || a.text == "-" {
			skip := make([]bool, len(args))
			skip[i] = true
			return skip
		}
	}
	return nil
}

// aliasValues parses the value of each `alias NAME=VALUE`: with
// expand_aliases on, a later NAME runs VALUE.
func (b *inputBuilder) aliasValues(sc *shellScope, args []shellWord) {
	for _, a := range args {
		v, ok := assignmentValue(a)
		if !ok || strings.TrimSpace(v.text) == "" {
			continue
		}
		if !v.literal {
			if v.subst {
				b.pipesToShell()
			}
			continue
		}
		dir := *sc.dir
		b.parseScript(shellScope{origin: originEval, depth: sc.depth + 1, dir: &dir, pipeLen: 1}, v.text, "")
	}
}

// findExecActions are the find actions that run a command.
var findExecActions = map[string]bool{"-exec": true, "-execdir": true, "-ok": true, "-okdir": true}

// findExecWords marks the args that belong to commands find runs
// (`-exec rm {} ;`), so find's own paths leave them out.
func findExecWords(args []shellWord) []bool {
	var skip []bool
	for i := 0; i < len(args); i++ {
		if !args[i].literal || !findExecActions[args[i].text] {
			continue
		}
		if skip == nil {
			skip = make([]bool, len(args))
		}
		for i++; i < len(args) && !(args[i].literal && (args[i].text == ";" || args[i].text == "+")); i++ {
			skip[i] = true
		}
	}
	return skip
}

// withTerminators returns skip with the ";" and "+" that end find's -exec
// actions marked too: they are find's syntax, not operands of its own.
func withTerminators(name string, args []shellWord, skip []bool) []bool {
	if name != "find" || skip == nil {
		return skip
	}
	out := slices.Clone(skip)
	for i := 1; i < len(args); i++ {
		if skip[i-1] && !skip[i] && args[i].literal && (args[i].text == ";" || args[i].text == "+") {
			out[i] = true
		}
	}
	return out
}

// findExec records the commands find runs with -exec and friends.
func (b *inputBuilder) findExec(sc *shellScope, args []shellWord, skip []bool, dir dirState, raw string) {
	if skip == nil {
		return
	}
	sub := shellScope{origin: originFind, depth: sc.depth, dir: &dir, pipeLen: 1}
	for i := 0; i < len(args); {
		if !skip[i] {
			i++
			continue
		}
		j := i
		for j < len(args) && skip[j] {
			j++
		}
		d := dir
		sub.dir = &d
		b.addCommand(&sub, args[i:j], cmdExtra{raw: raw})
		i = j
	}
}
