package engine

import (
	"maps"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// scopeExt is what a shellScope knows of the shell beyond where the
// command is: the variables with a known value, the function whose body
// it walks, and what the previous pipeline element writes to its stdin.
type scopeExt struct {
	vars       *shellVars // the shell's variables; nil: nothing is known (argv, find -exec)
	shell      string     // the shell that runs the script ("sh", "bash"; "" for --shell, eval and trap strings)
	function   string     // the function whose body this is; "" outside function bodies
	inFunc     bool       // in a function body: local works
	background bool       // runs asynchronously: cmd &, a coprocess
	pipeFeed   *stdinFeed // what the previous pipeline element writes, when it is known exactly
}

// staticState holds what one Parse call spends on static expansion, and
// the facts of the whole input that make every shell's variables unknown.
type staticState struct {
	braceWords  int               // words brace expansions gave
	unrolled    int               // syntax nodes walked again for loop iterations
	scanned     int               // syntax nodes the assignment scans visited
	expanded    int               // bytes variable expansions produced
	globLookups int               // directories read to match glob program words
	globMemo    map[string]string // glob pattern → its one executable match, or ""
	caller      *shellVars        // the variables of the shell running the command being recorded
	// childShells is false when a shell started from the input may run
	// code the parser does not see before its script: BASH_ENV or
	// exported functions (BASH_FUNC_*) in the environment, or export -f.
	childShellsUnknown bool
}

// Limits of static expansion, besides those of parse.go: they keep a
// hostile script from making the parser slow or the input large. Past a
// limit, a word or a variable is simply not known.
const (
	maxBraceWords  = 256     // words one brace expansion may give
	maxBraceTotal  = 4096    // words brace expansions may give in one Parse
	maxLoopWords   = 16      // words of a for loop whose body is walked once per word
	maxUnrollNodes = 1 << 16 // syntax nodes walked again for loop iterations in one Parse
	maxScanNodes   = 1 << 20 // syntax nodes the assignment scans visit in one Parse
	maxExpandBytes = 1 << 20 // bytes variable expansions may produce in one Parse
	maxTrackedVars = 256     // variables of one shell with a known value, poisoned or readonly
	maxGlobLookups = 16      // directories read to match glob words in one Parse
)

// shellVars is what parsing knows of one shell's variables at one point
// of a script: the literal value of some of them. Its contract is to
// never hold a stale value: a name is known only when every path of the
// script to this point assigned it that literal. What the walk cannot
// follow makes names unknown — a branch or loop that may assign them, a
// subshell's assignments never leak out of it, a function body or trap
// that may run later poisons the names it assigns for good, and code the
// parser cannot see (source, eval of unknown text, a dynamic command,
// aliases, traps on signals) turns the table off. A nil *shellVars knows
// nothing and ignores writes.
//
// Not followed, by design: an unknown value (from the environment or a
// substitution) evaluated in arithmetic may assign integers to other
// names; only integers, which name no program and no path outside the
// working directory.
type shellVars struct {
	vals     map[string]varValue // names with a known value
	poisoned map[string]bool     // names never known again in this shell
	readonly map[string]bool     // readonly names: an assignment fails, the value stays
	off      bool                // nothing is known any more
	globOpts bool                // shopt or setopt ran: globs may match other files, and echo behave otherwise, than the parser assumes
	// moved: the script assigned these of baseVars, so ~, $HOME and
	// $PWD are not the home and working directory paths.go takes them
	// for: they give the value when it is known, else a path known only
	// at run time. cd makes $PWD the working directory again.
	moved map[string]bool
	// funcArith: a function of the script evaluates arithmetic on
	// variables, so calling one may assign any variable (a value that is
	// an expression is evaluated).
	funcArith bool
	shared    bool // the maps are shared with a fork: copy them before writing
}

// varValue is the known value of a variable.
type varValue struct {
	text string
	// glob: text is a pattern (a for loop over *.md), and the value is
	// one of the file names it matches, unknown to the parser.
	glob bool
}

// defaultIFS is the IFS a shell starts with.
const defaultIFS = " \t\n"

// newShellVars returns the variables of a new shell running a script:
// nothing is known but IFS, which a shell never takes from its
// environment. A shell without sh's variable syntax (fish, csh), or one
// that may run code the parser does not see first, knows nothing.
func (b *inputBuilder) newShellVars(shell string) *shellVars {
	v := &shellVars{}
	starts := false // the command starting the shell (the last recorded) gives it BASH_ENV …
	if n := len(b.commands); n > 0 {
		for name := range b.commands[n-1].Assignments {
			starts = starts || runsCodeAtStart(name)
		}
	}
	if nonBourneShells[shell] || b.static.childShellsUnknown || starts {
		v.off = true
		return v
	}
	v.vals = map[string]varValue{"IFS": {text: defaultIFS}}
	// HOME is exported: a new shell has the value its caller gave it.
	if c := b.static.caller; c.isMoved("HOME") || b.startsWith("HOME") {
		v.move("HOME")
		if home, ok := c.lookup("HOME"); ok && !b.startsWith("HOME") {
			v.set("HOME", home)
		}
	}
	return v
}

// startsWith reports whether the command starting a new shell (the last
// recorded) gives it the variable name.
func (b *inputBuilder) startsWith(name string) bool {
	if n := len(b.commands); n > 0 {
		_, ok := b.commands[n-1].Assignments[name]
		return ok
	}
	return false
}

// runsCodeAtStart reports whether the environment variable name makes a
// shell run code before its script, or behave otherwise than the parser
// assumes: BASH_ENV (a file bash sources), BASH_FUNC_NAME%% (a function
// bash imports, which may stand for any command), BASHOPTS and SHELLOPTS
// (options bash imports: xpg_echo, nocaseglob, posix …).
func runsCodeAtStart(name string) bool {
	return name == "BASH_ENV" || name == "BASHOPTS" || name == "SHELLOPTS" || strings.HasPrefix(name, "BASH_FUNC_")
}

// envRunsCode reports whether an environment (names, or NAME=value)
// makes shells run code before their script.
func envRunsCode(env []string) bool {
	for _, e := range env {
		if name, _, _ := strings.Cut(e, "="); runsCodeAtStart(name) {
			return true
		}
	}
	return false
}

// noteAssign records an assignment to name in the script: one that makes
// the shells started after it run code first makes them unknown.
func (b *inputBuilder) noteAssign(name string) {
	if runsCodeAtStart(name) {
		b.static.childShellsUnknown = true
	}
}

// nonBourneShells are the shells of interpreterSpecs whose variables do
// not follow sh's syntax: their scripts get no table.
var nonBourneShells = map[string]bool{"fish": true, "csh": true, "tcsh": true}

// untrackedVars are variables the shell changes by itself, or that hold
// what the parser cannot know: their expansions are never literal, and
// assigning them records nothing. PWD is followed by cd (paths.go reads
// $PWD as the working directory) unless the script assigns it, see
// baseVars.
var untrackedVars = map[string]bool{
	"RANDOM": true, "SRANDOM": true, "SECONDS": true, "LINENO": true, "EPOCHSECONDS": true,
	"EPOCHREALTIME": true, "BASHPID": true, "BASH_COMMAND": true, "BASH_SUBSHELL": true,
	"BASH_ARGV0": true, "BASH_ARGC": true, "BASH_ARGV": true, "BASH_LINENO": true,
	"BASH_SOURCE": true, "BASH_REMATCH": true, "BASH_VERSINFO": true, "BASHOPTS": true,
	"SHELLOPTS": true, "BASH_ALIASES": true, "BASH_CMDS": true, "FUNCNAME": true,
	"GROUPS": true, "DIRSTACK": true, "PIPESTATUS": true, "HISTCMD": true, "PPID": true,
	"UID": true, "EUID": true, "OLDPWD": true, "REPLY": true, "OPTARG": true,
	"OPTIND": true, "MAPFILE": true, "COPROC": true, "COPROC_PID": true, "_": true,
	// zsh
	"argv": true, "status": true, "pipestatus": true, "ZSH_SUBSHELL": true, "EGID": true,
	"GID": true, "USERNAME": true,
}

// tiedVars are zsh's pairs of a scalar and an array holding one value:
// assigning one changes the other.
var tiedVars = map[string]string{
	"PATH": "path", "path": "PATH", "FPATH": "fpath", "fpath": "FPATH", "CDPATH": "cdpath",
	"cdpath": "CDPATH", "MANPATH": "manpath", "manpath": "MANPATH", "MAILPATH": "mailpath",
	"mailpath": "MAILPATH", "MODULE_PATH": "module_path", "module_path": "MODULE_PATH",
	"PSVAR": "psvar", "psvar": "PSVAR",
}

// isVarName reports whether s is a shell variable name.
func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// fork returns a copy of v for a subshell or a branch; both share their
// maps until one of them writes.
func (v *shellVars) fork() *shellVars {
	if v == nil {
		return nil
	}
	v.shared = true
	c := *v
	return &c
}

// own makes v's maps its own before a write.
func (v *shellVars) own() {
	if !v.shared {
		return
	}
	v.vals = maps.Clone(v.vals)
	v.poisoned = maps.Clone(v.poisoned)
	v.readonly = maps.Clone(v.readonly)
	v.moved = maps.Clone(v.moved)
	v.shared = false
}

// lookup returns the value of name when it is known.
func (v *shellVars) lookup(name string) (varValue, bool) {
	if v == nil || v.off {
		return varValue{}, false
	}
	val, ok := v.vals[name]
	return val, ok
}

// set records that name now holds val. It records nothing for an
// untracked or poisoned name, keeps the value of a readonly one (the
// assignment fails), and forgets the name when the table is full.
func (v *shellVars) set(name string, val varValue) {
	if v == nil || v.off || v.readonly[name] {
		return
	}
	if untrackedVars[name] || v.poisoned[name] || len(v.vals) >= maxTrackedVars {
		v.forget(name)
		return
	}
	v.move(name)
	v.own()
	if v.vals == nil {
		v.vals = map[string]varValue{}
	}
	v.vals[name] = val
	if t := tiedVars[name]; t != "" {
		delete(v.vals, t)
	}
}

// forget makes name unknown.
func (v *shellVars) forget(name string) {
	if v == nil || v.off {
		return
	}
	v.move(name)
	_, known := v.vals[name]
	t := tiedVars[name]
	if _, tknown := v.vals[t]; !known && !(t != "" && tknown) {
		return
	}
	v.own()
	delete(v.vals, name)
	delete(v.vals, t)
}

// baseVars are the variables paths.go resolves paths against: $HOME and
// ~ as the home, $PWD as the working directory.
var baseVars = map[string]bool{"HOME": true, "PWD": true}

// move records an assignment to name when it is one of baseVars.
func (v *shellVars) move(name string) {
	if !baseVars[name] || v.moved[name] {
		return
	}
	v.own()
	if v.moved == nil {
		v.moved = map[string]bool{}
	}
	v.moved[name] = true
}

// isMoved reports whether the script assigned name, one of baseVars.
func (v *shellVars) isMoved(name string) bool {
	return v != nil && v.moved[name]
}

// baseUnknown reports whether the script assigned name, one of baseVars,
// a value the parser does not know (or one it no longer knows, the table
// off): a path based on it is known only at run time.
func (v *shellVars) baseUnknown(name string) bool {
	if v == nil || !v.moved[name] {
		return false
	}
	_, known := v.lookup(name)
	return !known
}

// poison makes name unknown for the rest of the shell: code that may run
// at any later time assigns it, or it got an attribute that changes what
// an assignment stores.
func (v *shellVars) poison(name string) {
	if v == nil || v.off {
		return
	}
	if len(v.poisoned) >= maxTrackedVars {
		v.disable()
		return
	}
	v.forget(name)
	v.own()
	if v.poisoned == nil {
		v.poisoned = map[string]bool{}
	}
	v.poisoned[name] = true
	if t := tiedVars[name]; t != "" {
		v.poisoned[t] = true
	}
}

// markReadonly records that assignments to name fail from now on.
func (v *shellVars) markReadonly(name string) {
	if v == nil || v.off {
		return
	}
	if len(v.readonly) >= maxTrackedVars {
		v.disable()
		return
	}
	v.own()
	if v.readonly == nil {
		v.readonly = map[string]bool{}
	}
	v.readonly[name] = true
}

// forgetAll makes every name unknown; names assigned later are known again.
func (v *shellVars) forgetAll() {
	if v == nil || v.off || len(v.vals) == 0 {
		return
	}
	v.own()
	v.vals = nil
}

// disable makes every name unknown for the rest of the shell; a base
// variable the script assigned stays moved.
func (v *shellVars) disable() {
	if v == nil {
		return
	}
	*v = shellVars{off: true, globOpts: true, moved: v.moved, shared: true}
}

// merge folds into v (the state before a branch) the state at the end
// of a branch that may or may not have run: a name stays known only when
// both agree on its value, names poisoned or made readonly in the branch
// are poisoned, and what turned the branch's table off turns v's off.
func (v *shellVars) merge(br *shellVars) {
	if v == nil || br == nil || v.off {
		return
	}
	if br.off {
		v.disable()
		return
	}
	v.globOpts = v.globOpts || br.globOpts
	v.funcArith = v.funcArith || br.funcArith
	for name := range br.moved {
		v.move(name)
	}
	for name := range br.poisoned {
		v.poison(name)
	}
	for name := range br.readonly {
		if !v.readonly[name] {
			v.poison(name)
		}
	}
	for name, val := range v.vals {
		if bv, ok := br.vals[name]; !ok || bv != val {
			v.forget(name)
		}
	}
}

// assign records the assignment a of the word val (a=v, a+=v, a[i]=v,
// a=(…)) in v.
func (v *shellVars) assign(a *syntax.Assign, val shellWord) {
	if v == nil || a == nil || a.Name == nil {
		return
	}
	name := a.Name.Value
	switch {
	case a.Index != nil || a.Array != nil || !val.literal:
		v.forget(name)
	case a.Append:
		old, ok := v.lookup(name)
		if !ok || old.glob || val.glob {
			v.forget(name)
			return
		}
		v.set(name, varValue{text: old.text + val.text})
	default:
		v.set(name, varValue{text: val.text, glob: val.glob})
	}
}

// isInteger reports whether s is a decimal integer, a value arithmetic
// evaluates to itself.
func isInteger(s string) bool { return isDigits(strings.TrimPrefix(s, "-")) }

// arithRef records that arithmetic reads name: a known value that is not
// an integer is itself evaluated as an expression, which may assign any
// variable, so nothing is known after it.
func (v *shellVars) arithRef(name string) {
	if val, ok := v.lookup(name); ok && (val.glob || !isInteger(val.text)) {
		v.forgetAll()
	}
}

// arithTarget records an arithmetic assignment (x=1, x++, a[i]+=2).
func (v *shellVars) arithTarget(x syntax.ArithmExpr) {
	if name := arithName(x); name != "" {
		v.forget(name)
	} else {
		v.forgetAll()
	}
}

// arithName returns the variable an arithmetic operand names (x, a[i]),
// or "".
func arithName(x syntax.ArithmExpr) string {
	w, ok := x.(*syntax.Word)
	if !ok || len(w.Parts) != 1 {
		return ""
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		if isVarName(p.Value) {
			return p.Value
		}
	case *syntax.ParamExp:
		if p.Param != nil && isVarName(p.Param.Value) {
			return p.Param.Value
		}
	}
	return ""
}

// isAssignOp reports whether op assigns (=, +=, …).
func isAssignOp(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn,
		syntax.RemAssgn, syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
		return true
	}
	return false
}

// isArithTest reports whether a [[ ]] operator compares its operands as
// arithmetic expressions.
func isArithTest(op syntax.BinTestOperator) bool {
	switch op {
	case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
		return true
	}
	return false
}

// arithRefs calls ref for every variable an arithmetic expression reads.
func arithRefs(x syntax.Node, ref func(string)) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return false
		case *syntax.Word:
			if name := arithName(n); name != "" {
				ref(name)
			}
		case *syntax.ParamExp:
			if n.Param != nil {
				ref(n.Param.Value)
			}
		}
		return true
	})
}

// arithContexts calls f with every arithmetic expression node n holds
// directly ($((…)), ((…)), let, for ((…)), ${a[i]}, ${s:i:j}, a[i]=,
// [[ x -eq y ]]).
func arithContexts(n syntax.Node, f func(syntax.Node)) {
	switch n := n.(type) {
	case *syntax.ArithmExp:
		f(n.X)
	case *syntax.ArithmCmd:
		f(n.X)
	case *syntax.LetClause:
		for _, e := range n.Exprs {
			f(e)
		}
	case *syntax.CStyleLoop:
		f(n.Init)
		f(n.Cond)
		f(n.Post)
	case *syntax.ParamExp:
		if n.Index != nil {
			f(n.Index)
		}
		if n.Slice != nil {
			f(n.Slice.Offset)
			f(n.Slice.Length)
		}
	case *syntax.Assign:
		if n.Index != nil {
			f(n.Index)
		}
	case *syntax.BinaryTest:
		if isArithTest(n.Op) {
			f(n.X)
			f(n.Y)
		}
	}
}

// expansionEffects applies what expanding node assigns in the current
// shell: ${X:=v} and ${X=v}, arithmetic assignments ($((X=1)), ((X++)),
// let, a[i]=…), and arithmetic reading a value that is an expression.
// Substitutions run in subshells and are not entered (mksh's ${ …;},
// which runs in the shell, turns the table off).
func (v *shellVars) expansionEffects(node syntax.Node) {
	if v == nil || v.off || node == nil {
		return
	}
	syntax.Walk(node, func(n syntax.Node) bool {
		if v.off {
			return false
		}
		arithContexts(n, func(x syntax.Node) { arithRefs(x, v.arithRef) })
		switch n := n.(type) {
		case *syntax.CmdSubst:
			if n.TempFile || n.ReplyVar {
				v.disable()
			}
			return false
		case *syntax.ProcSubst:
			return false
		case *syntax.ParamExp:
			if n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) {
				if n.Excl || n.Param == nil {
					v.forgetAll()
				} else {
					v.forget(n.Param.Value)
				}
			}
		case *syntax.BinaryArithm:
			if isAssignOp(n.Op) {
				v.arithTarget(n.X)
			}
		case *syntax.UnaryArithm:
			if n.Op == syntax.Inc || n.Op == syntax.Dec {
				v.arithTarget(n.X)
			}
		}
		return true
	})
}

// builtinEffect is what a builtin does to the shell's variables.
type builtinEffect uint8

const (
	effNone    builtinEffect = iota
	effNames                 // assigns or unsets the variables its words name (read x, unset x)
	effDeclare               // declares the names it gives, maybe with attributes (builtin declare …)
	effClear                 // may assign any variable (let, via builtin)
	effUnknown               // runs or defines code the parser does not see (source, enable, alias)
	effEval                  // runs its words as code: parsed when literal, else unknown
	effTrap                  // runs code later, at a signal
	effGlob                  // changes what globs match (shopt, setopt)
)

// builtinEffects lists the builtins that change the shell's variables,
// or what the parser can know of them, when they run as commands (the
// declaration keywords export, local … are parsed apart, see declClause).
var builtinEffects = map[string]builtinEffect{
	"read": effNames, "mapfile": effNames, "readarray": effNames, "getopts": effNames,
	"printf": effNames, "wait": effNames, "unset": effNames, "vared": effNames,
	"declare": effDeclare, "typeset": effDeclare, "local": effDeclare, "export": effDeclare,
	"readonly": effDeclare, "nameref": effDeclare, "integer": effDeclare, "float": effDeclare,
	"let":    effClear,
	"source": effUnknown, ".": effUnknown, "enable": effUnknown, "alias": effUnknown,
	"zmodload": effUnknown, "autoload": effUnknown,
	"eval":  effEval,
	"trap":  effTrap,
	"shopt": effGlob, "setopt": effGlob, "unsetopt": effGlob,
}

// specialBuiltins are the POSIX special builtins: in POSIX mode (dash,
// bash --posix) an assignment before one of them, or before a function
// call, stays in the shell after the command.
var specialBuiltins = map[string]bool{
	":": true, ".": true, "source": true, "break": true, "continue": true, "eval": true,
	"exec": true, "exit": true, "export": true, "readonly": true, "return": true, "set": true,
	"shift": true, "times": true, "trap": true, "unset": true,
}

// exitSignals name the trap that runs when the shell exits, after which
// none of its commands runs.
var exitSignals = map[string]bool{"EXIT": true, "0": true, "SIGEXIT": true}

// commandWord returns the index in words of the word that names what a
// simple command runs in the shell, past the builtin and command
// prefixes (command -p), or -1 when there is none.
func commandWord(words []shellWord) int {
	i := 0
	for i < len(words) && words[i].literal && (words[i].text == "builtin" || words[i].text == "command") {
		i++
		for i < len(words) && words[i].literal && strings.HasPrefix(words[i].text, "-") && words[i].text != "-" {
			i++
		}
	}
	if i >= len(words) {
		return -1
	}
	return i
}

// commandEffects applies what a simple command of the words does to the
// variables of the shell that runs it, once it ran; prefix are the names
// of its leading NAME=value assignments.
func (b *inputBuilder) commandEffects(sc *shellScope, words []shellWord, prefix []string) {
	v := sc.vars
	if v == nil || v.off {
		return
	}
	k := commandWord(words)
	if k < 0 {
		return
	}
	w := words[k]
	if !w.literal || w.glob {
		// What runs is only known at run time: a function, eval, source …
		v.disable()
		return
	}
	name, args := w.text, words[k+1:]
	if name == "cd" || name == "pushd" || name == "popd" {
		// cd sets PWD to the directory the parser follows.
		v.forget("PWD")
		v.own()
		delete(v.moved, "PWD")
	}
	if specialBuiltins[name] || b.isFunction(name) {
		for _, p := range prefix {
			v.forget(p)
		}
	}
	if v.funcArith && b.isFunction(name) {
		v.forgetAll()
	}
	switch builtinEffects[name] {
	case effNames:
		for _, a := range namedBy(name, args) {
			switch {
			case !a.literal:
				v.forgetAll()
			case isVarName(a.text):
				v.forget(a.text)
			}
		}
	case effDeclare:
		for _, a := range args {
			n, _, _ := strings.Cut(a.text, "=")
			switch {
			case !a.literal:
				v.disable()
				return
			case strings.HasPrefix(a.text, "-") || strings.HasPrefix(a.text, "+"):
				if strings.ContainsRune(a.text, 'n') {
					v.disable()
					return
				}
				if strings.ContainsRune(a.text, 'i') {
					v.forgetAll()
				}
			case isVarName(n):
				v.poison(n)
			}
		}
	case effClear:
		v.forgetAll()
	case effUnknown:
		v.disable()
	case effEval:
		for _, a := range args {
			if !a.literal {
				v.disable()
			}
		}
	case effTrap:
		v.trap(args)
	case effGlob:
		v.own()
		v.globOpts = true
	}
}

// namedBy returns the words of a builtin of effNames that may name the
// variables it assigns: printf only assigns with -v NAME, wait with -p
// NAME; read, unset and the others every word (options included, which
// are no names).
func namedBy(name string, args []shellWord) []shellWord {
	opt := map[string]string{"printf": "-v", "wait": "-p"}[name]
	if opt == "" {
		return args
	}
	for i, a := range args {
		switch {
		case !a.literal:
			return args[i:] // maybe the option, maybe not
		case a.text == opt && i+1 < len(args):
			return args[i+1 : i+2]
		case strings.HasPrefix(a.text, opt):
			return []shellWord{{text: a.text[len(opt):], literal: true}}
		case a.text == "--" || !strings.HasPrefix(a.text, "-"):
			return nil
		}
	}
	return nil
}

// trap applies `trap ACTION SIGNAL…`: an action run at a signal may run
// between any two commands, so the table is off; one run only at exit
// (or a reset, or an ignored signal) changes nothing, whatever the action.
func (v *shellVars) trap(args []shellWord) {
	var ops []shellWord
	for i, a := range args {
		if a.literal && a.text == "--" {
			ops = args[i+1:]
			break
		}
		if !a.literal || !strings.HasPrefix(a.text, "-") || a.text == "-" {
			ops = args[i:]
			break
		}
	}
	if len(ops) < 2 || ops[0].literal && (ops[0].text == "" || ops[0].text == "-" || isInteger(ops[0].text)) {
		return
	}
	for _, s := range ops[1:] {
		if !s.literal || !exitSignals[strings.ToUpper(s.text)] {
			v.disable()
			return
		}
	}
}

// isFunction reports whether the script defines a function name.
func (b *inputBuilder) isFunction(name string) bool {
	if b.script == nil {
		return false
	}
	for _, f := range b.script.Functions {
		if f == name {
			return true
		}
	}
	return false
}

// declEffects applies a declaration (export, readonly, local, declare,
// typeset, nameref) to the shell's variables; opts are the option
// letters it was given. An option other than those of plainDeclOpts may
// give a name an attribute that changes what later assignments store
// (-i, -l, -u, -a), so the name is poisoned; a nameref (-n) makes an
// assignment to one name change another, so nothing is known after it;
// local outside a function fails.
func (b *inputBuilder) declEffects(sc *shellScope, variant, opts string, a *syntax.Assign, val shellWord) {
	v := sc.vars
	if v == nil || v.off {
		return
	}
	if a.Name != nil {
		b.noteAssign(a.Name.Value)
	}
	if strings.ContainsRune(opts, 'f') && (variant == "export" || strings.ContainsRune(opts, 'x')) {
		b.static.childShellsUnknown = true // exported functions run in child shells
	}
	if strings.ContainsRune(opts, 'i') {
		v.forgetAll() // values are evaluated as arithmetic
	}
	if strings.ContainsRune(opts, 'n') && variant != "export" || variant == "nameref" {
		v.disable()
		return
	}
	plain := strings.Trim(opts, plainDeclOpts) == ""
	name, assigns, quoted := "", false, false
	switch {
	case a.Name != nil:
		name, assigns = a.Name.Value, !a.Naked
	case a.Value == nil:
		return
	case !val.literal:
		// declare "$x": any name, maybe with an attribute.
		if plain {
			v.forgetAll()
		} else {
			v.disable()
		}
		return
	case strings.HasPrefix(val.text, "-") || strings.HasPrefix(val.text, "+"):
		return // an option
	default:
		// declare 'x=1' assigns too: only the name is sure.
		n, _, found := strings.Cut(val.text, "=")
		if !isVarName(n) {
			return
		}
		name, quoted = n, found
	}
	switch {
	case !plain:
		v.poison(name)
	case quoted, variant == "local" && (!sc.inFunc || !assigns):
		v.forget(name) // local fails outside functions; local x unsets x
	case assigns:
		v.assign(a, val)
	}
	if plain && (variant == "readonly" || strings.ContainsRune(opts, 'r')) {
		v.markReadonly(name)
	}
}

// plainDeclOpts are the options of declare and its kin that change no
// value: export (-x), readonly (-r), global (-g), print (-p).
const plainDeclOpts = "xrgp"

// assignScan is what a syntax tree may assign when it runs, as far as
// its text tells: the scan of a loop, whose body may run any number of
// times, or of a function body, which may run at any later time.
type assignScan struct {
	names     map[string]bool // variables it may assign
	funcNames map[string]bool // variables the function bodies it defines may assign
	refs      map[string]bool // variables its arithmetic reads
	all       bool            // it may assign any variable
	funcAll   bool            // a function body it defines may assign any variable
	nodes     int             // syntax nodes in it
}

// loopBinding is the variable of a for loop over static words and the
// words: a program word $NAME in the loop is one of them.
type loopBinding struct {
	name   string
	values []shellWord
}

// scanAssigns scans node; loop, when not nil, binds the variable of the
// for loop node is. Substitutions are not entered (they run in
// subshells). Past maxScanNodes in one Parse, a scan finds that anything
// may be assigned.
func (b *inputBuilder) scanAssigns(node syntax.Node, loop *loopBinding) *assignScan {
	s := &assignScan{names: map[string]bool{}, funcNames: map[string]bool{}, refs: map[string]bool{}}
	b.scanInto(s, node, false, loop)
	return s
}

func (b *inputBuilder) scanInto(s *assignScan, node syntax.Node, inFunc bool, loop *loopBinding) {
	if node == nil {
		return
	}
	add := func(name string) {
		if inFunc {
			s.funcNames[name] = true
		} else {
			s.names[name] = true
		}
	}
	addAll := func() {
		if inFunc {
			s.funcAll = true
		} else {
			s.all = true
		}
	}
	ref := func(name string) { s.refs[name] = true }
	syntax.Walk(node, func(n syntax.Node) bool {
		if n == nil {
			return false
		}
		if b.static.scanned++; b.static.scanned > maxScanNodes {
			s.all, s.funcAll = true, true
			return false
		}
		s.nodes++
		arithContexts(n, func(x syntax.Node) { arithRefs(x, ref) })
		switch n := n.(type) {
		case *syntax.CmdSubst:
			if n.TempFile || n.ReplyVar {
				addAll()
			}
			return false
		case *syntax.ProcSubst:
			return false
		case *syntax.FuncDecl:
			b.scanInto(s, n.Body, true, nil)
			return false
		case *syntax.Assign:
			switch {
			case n.Name != nil:
				add(n.Name.Value)
			case n.Value != nil:
				t, ok := litText(n.Value)
				if name, _, _ := strings.Cut(t, "="); !ok {
					addAll()
				} else if isVarName(name) {
					add(name)
				}
			}
		case *syntax.DeclClause:
			if n.Variant.Value == "nameref" {
				addAll()
			}
			for _, a := range n.Args {
				if t, ok := litText(a.Value); ok && a.Naked && a.Name == nil && strings.HasPrefix(t, "-") && strings.ContainsAny(t, "in") {
					addAll() // -i evaluates values as arithmetic, -n makes a name stand for another
				}
			}
		case *syntax.WordIter:
			add(n.Name.Value)
		case *syntax.ParamExp:
			if n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) {
				if n.Excl || n.Param == nil {
					addAll()
				} else {
					add(n.Param.Value)
				}
			}
		case *syntax.BinaryArithm:
			if isAssignOp(n.Op) {
				if name := arithName(n.X); name != "" {
					add(name)
				} else {
					addAll()
				}
			}
		case *syntax.UnaryArithm:
			if n.Op == syntax.Inc || n.Op == syntax.Dec {
				if name := arithName(n.X); name != "" {
					add(name)
				} else {
					addAll()
				}
			}
		case *syntax.Redirect:
			if n.N != nil && strings.HasPrefix(n.N.Value, "{") {
				add(strings.Trim(n.N.Value, "{}"))
			}
		case *syntax.CoprocClause:
			if n.Name == nil {
				break
			}
			if t, ok := litText(n.Name); ok {
				add(t)
				add(t + "_PID")
			} else {
				addAll()
			}
		case *syntax.CallExpr:
			b.scanCall(n, loop, add, addAll)
		}
		return true
	})
}

// scanCall records what a simple command may assign, from its words.
func (b *inputBuilder) scanCall(c *syntax.CallExpr, loop *loopBinding, add func(string), addAll func()) {
	k := 0
	for k < len(c.Args) {
		t, ok := litText(c.Args[k])
		if !ok && k == 0 && loop != nil && isParamOf(c.Args[0], loop.name) {
			// $f of for f in ls git: each word is a program.
			for _, v := range loop.values {
				if v.glob || builtinEffects[v.text] != effNone || v.text == "builtin" || v.text == "command" || b.isFunction(v.text) {
					addAll()
					return
				}
			}
			return
		}
		if !ok {
			addAll() // a program known only at run time: eval, a function …
			return
		}
		if t != "builtin" && t != "command" && (k == 0 || !strings.HasPrefix(t, "-")) {
			break
		}
		k++
	}
	if k >= len(c.Args) {
		return
	}
	name, _ := litText(c.Args[k])
	eff := builtinEffects[name]
	if eff != effNames && eff != effDeclare {
		if eff != effNone && eff != effGlob {
			addAll()
		}
		return
	}
	words := make([]shellWord, 0, len(c.Args)-k-1)
	for _, w := range c.Args[k+1:] {
		t, ok := litText(w)
		words = append(words, shellWord{text: t, literal: ok})
	}
	if eff == effNames {
		words = namedBy(name, words)
	}
	for _, w := range words {
		n, _, _ := strings.Cut(w.text, "=")
		switch {
		case !w.literal:
			addAll()
		case isVarName(n):
			add(n)
		}
	}
}

// isParamOf reports whether w is $name or ${name}, quoted or not.
func isParamOf(w *syntax.Word, name string) bool {
	if len(w.Parts) != 1 {
		return false
	}
	part := w.Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part = dq.Parts[0]
	}
	p, ok := part.(*syntax.ParamExp)
	return ok && p.Param != nil && p.Param.Value == name && !p.Excl && !p.Length && p.Exp == nil && p.Index == nil &&
		p.Slice == nil && p.Repl == nil && p.Names == 0
}

// litText returns the text of a word made only of literal parts (plain,
// quoted, escaped), with quotes removed.
func litText(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	var sb strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			unescapeShell(&sb, p.Value, "")
		case *syntax.SglQuoted:
			if p.Dollar {
				ansiC(&sb, p.Value)
			} else {
				sb.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				unescapeShell(&sb, l.Value, "$`\"\\\n")
			}
		default:
			return "", false
		}
	}
	return sb.String(), true
}

// enterLoop prepares v for walking a loop scanned as s: every variable
// the loop may assign is unknown (its body may have run before), the
// names its function bodies assign are poisoned, and arithmetic reading
// a variable the loop assigns may assign any.
func (v *shellVars) enterLoop(s *assignScan) {
	if v == nil || v.off {
		return
	}
	if s.funcAll {
		v.disable()
		return
	}
	for n := range s.funcNames {
		v.poison(n)
	}
	v.forgetScan(s)
	for n := range s.refs {
		if s.names[n] {
			v.forgetAll()
			break
		}
		v.arithRef(n)
	}
}

// forgetScan makes unknown what the scan s may assign.
func (v *shellVars) forgetScan(s *assignScan) {
	if s.all {
		v.forgetAll()
		return
	}
	for n := range s.names {
		v.forget(n)
	}
}

// defineFunction records in v that a function scanned as s was defined:
// it may run at any later time, so the names it assigns are poisoned,
// and when it evaluates arithmetic, a call to a function may assign any
// variable.
func (v *shellVars) defineFunction(s *assignScan) {
	if v == nil || v.off {
		return
	}
	if s.all || s.funcAll {
		v.disable()
		return
	}
	for _, set := range [2]map[string]bool{s.names, s.funcNames} {
		for n := range set {
			v.poison(n)
		}
	}
	if len(s.refs) > 0 {
		v.own()
		v.funcArith = true
	}
}
