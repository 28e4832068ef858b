package engine

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"avfs/wire"
)

// shParsers reuses bash parsers: a parser holds a few KiB of buffers and is
// reset by every Parse call, and the trees it returns do not borrow them.
var shParsers = sync.Pool{New: func() any {
	return syntax.NewParser(syntax.Variant(syntax.LangBash))
}}

// parseScript parses src as a bash script and records every simple command
// in it under sc. The first script parsed becomes Input.Script (run by
// shell); scripts found inside it (bash -c in a script, eval strings) add
// their commands, redirects and functions to the same Script. A script
// that does not parse, or is nested too deep, sets Script.ParseError.
func (b *inputBuilder) parseScript(sc shellScope, src, shell string) {
	if b.script == nil {
		b.script = newScript(src, shell)
	}
	if sc.depth > maxScriptDepth {
		b.parseError("scripts nested more than " + strconv.Itoa(maxScriptDepth) + " deep")
		return
	}
	if err := b.ctx.Err(); err != nil {
		b.err = err
		return
	}
	if msg := checkNesting(src); msg != "" {
		b.parseError(msg)
		return
	}
	p := shParsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	shParsers.Put(p)
	if err != nil {
		b.parseError(err.Error())
		return
	}
	sc.src = src
	if sc.vars == nil {
		if sc.origin == originEval {
			sc.vars = &shellVars{} // a trap action or an alias value, run later: nothing is known
		} else {
			sc.vars = b.newShellVars(shell)
		}
	}
	if shell != "" || sc.origin != originEval {
		sc.shell = shell // eval runs in the shell of its caller
	}
	b.walkStmts(&sc, f.Stmts)
}

// checkNesting rejects a script the bash parser could not parse safely:
// longer than an exec argument can be, brackets nested deeper than
// maxNesting, or a run of more than maxOpRun unary operators. The parser
// recurses on each, and Go cannot recover from a stack overflow. Quotes
// are ignored, so the count errs on the side of rejecting.
func checkNesting(src string) string {
	if len(src) > maxWordBytes {
		return "script longer than " + strconv.Itoa(maxWordBytes) + " bytes"
	}
	depth, run := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '{', '[':
			if depth++; depth > maxNesting {
				return "script nested deeper than " + strconv.Itoa(maxNesting) + " levels"
			}
		case ')', '}', ']':
			depth = max(depth-1, 0)
		case '!', '~', '+', '-':
			if run++; run > maxOpRun {
				return "script has more than " + strconv.Itoa(maxOpRun) + " operators in a row"
			}
			continue
		case ' ', '\t':
			continue
		}
		run = 0
	}
	return ""
}

// parseError records the first parse error of the script.
func (b *inputBuilder) parseError(msg string) {
	if b.script.ParseError == "" {
		b.script.ParseError = msg
	}
}

// walkStmts records the commands of a statement list, in order.
func (b *inputBuilder) walkStmts(sc *shellScope, stmts []*syntax.Stmt) {
	for _, s := range stmts {
		if b.err != nil {
			return
		}
		b.walkStmt(sc, s)
	}
}

// walkStmt records the commands of one statement and its redirections.
func (b *inputBuilder) walkStmt(sc *shellScope, s *syntax.Stmt) {
	if s == nil {
		return
	}
	if s.Background || s.Coprocess || s.Disown {
		bg := *sc
		bg.vars = sc.vars.fork() // it runs in a subshell: its assignments stay there
		bg.background = true
		sc = &bg
	}
	start := len(b.commands)
	before := *sc.dir // redirections are opened before the command runs
	redirs, feed := b.redirects(sc, s.Redirs)
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		b.callExpr(sc, s, c, redirs, feed)
	case nil:
		b.addBare(sc, s, nil, redirs)
	default:
		b.compound(sc, s, c)
		if len(redirs) == 0 {
			break
		}
		if len(b.commands) == start {
			at := *sc
			at.dir = &before
			b.addBare(&at, s, nil, redirs)
			break
		}
		for i := start; i < len(b.commands); i++ {
			for _, r := range redirs {
				b.commands[i].Redirects = append(b.commands[i].Redirects, r.wire)
			}
		}
		for _, r := range redirs {
			if r.isPath {
				b.addRolePath(r.target, before, sourceRedirect, start, r.role)
			}
		}
	}
	// A substitution in a redirection of a simple command feeds that
	// command (bash < <(curl …)); one of a compound command feeds no
	// single command.
	target := -1
	if _, simple := s.Cmd.(*syntax.CallExpr); simple && len(b.commands) > start {
		target = start
	}
	for _, r := range s.Redirs {
		if r.Word != nil {
			b.walkSubstFor(sc, r.Word, target)
		}
		if r.Hdoc != nil {
			b.walkSubstFor(sc, r.Hdoc, target) // a heredoc body is not a command, but $(…) in it runs
		}
	}
}

// callExpr records a simple command: its words after expansion markers are
// resolved, then the substitutions inside its words. Assignments without
// a command (X=v) set the shell's variables one after the other; those
// before a command (X=v cmd) only its environment, and the command's
// words expand with the shell's values.
func (b *inputBuilder) callExpr(sc *shellScope, s *syntax.Stmt, c *syntax.CallExpr, redirs []shellRedirect, feed stdinFeed) {
	sc.vars.expansionEffects(c) // ${X:=v}, $((X=1)) assign while the words expand
	plain := true               // no word can hold a substitution
	assigns := make([]envAssignment, 0, len(c.Assigns))
	env := sc
	if len(c.Args) > 0 {
		e := *sc
		e.vars = sc.vars.fork() // the command's environment, assigned left to right
		env = &e
	}
	prefix := make([]string, 0, len(c.Assigns))
	for _, a := range c.Assigns {
		if a != nil && a.Name != nil {
			v := b.assignValue(env, a)
			env.vars.assign(a, v)
			b.noteAssign(a.Name.Value)
			plain = plain && v.literal && a.Index == nil
			assigns = append(assigns, envAssignment{name: a.Name.Value, value: v})
			prefix = append(prefix, a.Name.Value)
		}
	}
	at := len(b.commands)
	if len(c.Args) == 0 {
		b.addBare(sc, s, assigns, redirs)
	} else {
		words := b.expandWords(sc, c.Args)
		if isAssignment(words[0].text) {
			// The shell took its assignments already: a first word that
			// looks like one ('X=1', $x, {X=1,ls}) is the program.
			words[0].literal = false
		}
		for _, w := range words {
			plain = plain && w.literal
		}
		if !feed.redirected && sc.pipeFeed != nil {
			feed = *sc.pipeFeed
		}
		b.static.caller = sc.vars
		b.addCommand(sc, words, cmdExtra{raw: stmtSource(sc.src, s), assigns: assigns, redirs: redirs, stdin: feed})
		b.commandEffects(sc, words, prefix)
	}
	if !plain || len(assigns) != len(c.Assigns) {
		target := -1
		if len(b.commands) > at {
			target = at
		}
		b.walkSubstFor(sc, c, target)
	}
}

// addBare records a statement without a program — only assignments or
// redirections (`> file`, `FOO=bar`) — as a command with an empty argv,
// so its paths and assignments have a command to belong to.
func (b *inputBuilder) addBare(sc *shellScope, s *syntax.Stmt, assigns []envAssignment, redirs []shellRedirect) {
	if len(assigns) == 0 && len(redirs) == 0 {
		return
	}
	cmd := newCommand(sc.origin)
	cmd.Raw = stmtSource(sc.src, s)
	cmd.Pipeline, cmd.PipelineLen = sc.pipe, sc.pipeLen
	cmd.Function, cmd.Background = sc.function, sc.background
	cmd.Feeds = sc.feeds - 1
	idx := len(b.commands)
	for _, a := range assigns {
		cmd.Assignments[a.name] = a.value.text
		if !a.value.literal {
			cmd.Dynamic = true
		}
		if looksLikePath(a.value) {
			b.addPath(a.value, *sc.dir, sourceArg, idx)
		}
	}
	for _, r := range redirs {
		cmd.Redirects = append(cmd.Redirects, r.wire)
		if r.isPath {
			b.addRolePath(r.target, *sc.dir, sourceRedirect, idx, r.role)
		}
	}
	b.commands = append(b.commands, cmd)
}

// compound records the commands inside a compound command. The shell's
// variables follow the control flow: what a branch assigns is known
// after it only when every path agrees, a loop's assignments are unknown
// in it and after it, a subshell's stay in it.
func (b *inputBuilder) compound(sc *shellScope, s *syntax.Stmt, cmd syntax.Command) {
	switch c := cmd.(type) {
	case *syntax.Block:
		b.walkStmts(sc, c.Stmts)
	case *syntax.Subshell:
		sub := sc.child()
		b.walkStmts(&sub, c.Stmts)
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			b.pipeline(sc, c)
		} else {
			b.walkStmt(sc, c.X)
			y := sc.branch() // runs only when X succeeds (&&) or fails (||)
			b.walkStmt(&y, c.Y)
			sc.vars.merge(y.vars)
		}
	case *syntax.IfClause:
		b.ifClause(sc, c)
	case *syntax.WhileClause:
		scan := b.scanAssigns(c, nil)
		sc.vars.enterLoop(scan)
		b.walkStmts(sc, c.Cond)
		b.walkStmts(sc, c.Do)
		sc.vars.forgetScan(scan)
	case *syntax.ForClause:
		b.forClause(sc, c)
	case *syntax.CaseClause:
		b.caseClause(sc, c)
	case *syntax.FuncDecl:
		name := ""
		if c.Name != nil {
			name = c.Name.Value
			b.function(name)
		}
		for _, n := range c.Names {
			b.function(n.Value)
			name = cmp.Or(name, n.Value)
		}
		// The body runs when the function is called, at any later time:
		// nothing is known of the variables then, and what it assigns is
		// never known after the definition.
		body := *sc
		dir := *sc.dir
		body.dir = &dir
		body.pipe, body.pipeLen, body.pipeReader = 0, 1, false
		body.vars, body.function, body.inFunc, body.background, body.pipeFeed = &shellVars{}, name, true, false, nil
		b.walkStmt(&body, c.Body)
		if c.Body != nil {
			sc.vars.defineFunction(b.scanAssigns(c.Body, nil))
		}
	case *syntax.TestDecl:
		if c.Description != nil {
			b.walkSubst(sc, c.Description)
		}
		body := sc.child()
		b.walkStmt(&body, c.Body)
	case *syntax.DeclClause:
		b.declClause(sc, s, c)
	case *syntax.TimeClause:
		start := len(b.commands)
		b.walkStmt(sc, c.Stmt)
		if _, ok := stmtCmd(c.Stmt).(*syntax.CallExpr); ok && len(b.commands) > start {
			w := newWrapper("time")
			if c.PosixFormat {
				w.Argv = append(w.Argv, "-p")
				w.Flags = append(w.Flags, "-p")
			}
			cmd := &b.commands[start]
			cmd.Wrappers = append([]wire.Wrapper{w}, cmd.Wrappers...)
		}
	case *syntax.CoprocClause:
		if t, ok := litText(c.Name); ok {
			sc.vars.forget(t)
			sc.vars.forget(t + "_PID")
		}
		sub := sc.child()
		sub.background = true
		b.walkStmt(&sub, c.Stmt)
	default:
		// (( … )), [[ … ]], let: no command, but $(…) inside them runs.
		sc.vars.expansionEffects(c)
		b.walkSubst(sc, c)
	}
}

// ifClause records an if clause (c.Else is an elif or an else): the first
// condition always runs, each branch maybe.
func (b *inputBuilder) ifClause(sc *shellScope, c *syntax.IfClause) {
	b.walkStmts(sc, c.Cond)
	then := sc.branch()
	b.walkStmts(&then, c.Then)
	if c.Else != nil {
		els := sc.branch()
		b.ifClause(&els, c.Else)
		sc.vars.merge(els.vars)
	}
	sc.vars.merge(then.vars)
}

// caseClause records a case clause: each item is a branch; one that
// falls through (;& or ;;&) may run after the item before it.
func (b *inputBuilder) caseClause(sc *shellScope, c *syntax.CaseClause) {
	if c.Word != nil {
		sc.vars.expansionEffects(c.Word)
		b.walkSubst(sc, c.Word)
	}
	for _, item := range c.Items {
		for _, p := range item.Patterns {
			sc.vars.expansionEffects(p)
		}
	}
	ends := make([]*shellVars, 0, len(c.Items))
	var prev *shellVars
	for _, item := range c.Items {
		br := sc.branch()
		if prev != nil {
			br.vars.merge(prev)
		}
		for _, p := range item.Patterns {
			b.walkSubst(&br, p)
		}
		b.walkStmts(&br, item.Stmts)
		ends = append(ends, br.vars)
		prev = nil
		if item.Op == syntax.Fallthrough || item.Op == syntax.Resume {
			prev = br.vars
		}
	}
	for _, e := range ends {
		sc.vars.merge(e)
	}
}

// forClause records a for or select loop. Its words expand once, before
// it runs. A for loop over static words (at most maxLoopWords, and while
// maxUnrollNodes allow) walks its body once per word with the variable
// bound to it; a word that is a glob (*.md) binds it to the pattern,
// marked glob: its value is one of the file names the pattern matches,
// which the parser does not read (a relative glob names files of the
// working directory, so ".." is reached only through the pattern, which
// paths.go sees). Otherwise the variable is unknown and the body walked
// once.
func (b *inputBuilder) forClause(sc *shellScope, c *syntax.ForClause) {
	if c.Loop != nil {
		sc.vars.expansionEffects(c.Loop)
		b.walkSubst(sc, c.Loop)
	}
	var bind *loopBinding
	if iter, ok := c.Loop.(*syntax.WordIter); ok && !c.Select && iter.InPos.IsValid() {
		if items, ok := b.loopItems(sc, iter); ok {
			bind = &loopBinding{name: iter.Name.Value, values: items}
		}
	}
	scan := b.scanAssigns(c, bind)
	sc.vars.enterLoop(scan)
	if bind != nil && b.unroll(len(bind.values), scan.nodes) {
		for _, it := range bind.values {
			sc.vars.forgetScan(scan)
			sc.vars.set(bind.name, varValue{text: it.text, glob: it.glob})
			b.walkStmts(sc, c.Do)
		}
	} else {
		b.walkStmts(sc, c.Do)
	}
	sc.vars.forgetScan(scan)
}

// unroll reports whether a loop body of nodes syntax nodes may be walked
// n times, within maxUnrollNodes, and charges it.
func (b *inputBuilder) unroll(n, nodes int) bool {
	cost := max(n-1, 0) * nodes
	if b.static.unrolled+cost > maxUnrollNodes {
		return false
	}
	b.static.unrolled += cost
	return true
}

// loopItems returns the words a for loop iterates over when they are
// static: literal and at most maxLoopWords.
func (b *inputBuilder) loopItems(sc *shellScope, iter *syntax.WordIter) ([]shellWord, bool) {
	if sc.vars == nil || sc.vars.off || len(iter.Items) == 0 || len(iter.Items) > maxLoopWords {
		return nil, false
	}
	items := b.expandWords(sc, iter.Items)
	if len(items) > maxLoopWords {
		return nil, false
	}
	for _, it := range items {
		if !it.literal {
			return nil, false
		}
	}
	return items, true
}

// stmtCmd returns s.Cmd, or nil for a nil statement.
func stmtCmd(s *syntax.Stmt) syntax.Command {
	if s == nil {
		return nil
	}
	return s.Cmd
}

// child returns the scope of a subshell: same origin, own directory, own
// copy of the variables.
func (sc *shellScope) child() shellScope {
	c := *sc
	d := *sc.dir
	c.dir = &d
	c.vars = sc.vars.fork()
	return c
}

// branch returns the scope of code that may or may not run (an if
// branch, the right side of && and ||): the same shell, with a copy of
// the variables to merge back.
func (sc *shellScope) branch() shellScope {
	c := *sc
	c.vars = sc.vars.fork()
	return c
}

// evalScope returns the scope of a string eval runs: the same shell.
func (sc *shellScope) evalScope() shellScope {
	c := shellScope{origin: originEval, depth: sc.depth + 1, dir: sc.dir, pipeLen: 1, pipeReader: sc.pipeReader, feeds: sc.feeds, scopeExt: sc.scopeExt}
	c.pipeFeed = nil
	return c
}

// pipeline records the commands of `a | b | c`. Every element runs in its
// own subshell; every element after the first reads the one before it,
// whose output is known when it is literal text (echo, printf, cat of a
// heredoc: see pipeOutput). The last element may run in the shell itself
// (zsh, ksh, bash's lastpipe): what it assigns is merged as a branch.
func (b *inputBuilder) pipeline(sc *shellScope, c *syntax.BinaryCmd) {
	var elems []*syntax.Stmt
	elems = flattenPipeline(c.X, elems)
	elems = flattenPipeline(c.Y, elems)
	var feed *stdinFeed
	for i, e := range elems {
		sub := sc.child()
		sub.pipe, sub.pipeLen = i, len(elems)
		sub.pipeReader = sc.pipeReader || i > 0
		sub.pipeFeed = feed
		if i == 0 {
			sub.pipeFeed = sc.pipeFeed
		}
		feed = b.pipeOutput(&sub, e)
		b.walkStmt(&sub, e)
		if i == len(elems)-1 {
			sc.vars.merge(sub.vars)
		}
	}
}

// flattenPipeline appends the elements of a (possibly nested) pipeline.
func flattenPipeline(s *syntax.Stmt, out []*syntax.Stmt) []*syntax.Stmt {
	if s == nil {
		return out
	}
	if c, ok := s.Cmd.(*syntax.BinaryCmd); ok && (c.Op == syntax.Pipe || c.Op == syntax.PipeAll) && len(s.Redirs) == 0 && !s.Negated {
		out = flattenPipeline(c.X, out)
		return flattenPipeline(c.Y, out)
	}
	return append(out, s)
}

// function records the name of a function the script defines.
func (b *inputBuilder) function(name string) {
	for _, f := range b.script.Functions {
		if f == name {
			return
		}
	}
	b.script.Functions = append(b.script.Functions, name)
}

// walkSubst records the commands of every command and process substitution
// inside node (a word, an arithmetic or test expression, a loop header),
// without entering the substitutions' own statements twice. Their output
// goes to no single command (wire.Command.Feeds -1).
func (b *inputBuilder) walkSubst(sc *shellScope, node syntax.Node) {
	b.walkSubstFor(sc, node, -1)
}

// walkSubstFor is walkSubst for the substitutions of the words of the
// command at index target (-1 for none), whose output goes to it.
func (b *inputBuilder) walkSubstFor(sc *shellScope, node syntax.Node, target int) {
	if w, ok := node.(*syntax.Word); ok && plainWord(w) {
		return
	}
	syntax.Walk(node, func(n syntax.Node) bool {
		var stmts []*syntax.Stmt
		switch n := n.(type) {
		case *syntax.CmdSubst:
			stmts = n.Stmts
		case *syntax.ProcSubst:
			stmts = n.Stmts
		default:
			return true
		}
		b.script.HasSubstitution = true
		sub := sc.child()
		sub.origin = originSubstitution
		sub.feeds = target + 1
		sub.pipe, sub.pipeLen, sub.pipeReader, sub.pipeFeed = 0, 1, false, nil
		if ps, ok := n.(*syntax.ProcSubst); ok && ps.Op == syntax.CmdOut {
			sub.pipeReader = true // >(cmd) reads what the command writes to it
		}
		b.walkStmts(&sub, stmts)
		return false
	})
}

// plainWord reports whether w is made of literal parts only.
func plainWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		default:
			return false
		}
	}
	return true
}

// declClause records export, declare, local, readonly, typeset and nameref
// as commands: their assignments are visible like a program's arguments.
//
// The declarations change the shell's variables as they go (local a=1
// b=$a gives b the value 1): see declEffects.
func (b *inputBuilder) declClause(sc *shellScope, s *syntax.Stmt, c *syntax.DeclClause) {
	sc.vars.expansionEffects(c)
	words := make([]shellWord, 0, 1+len(c.Args))
	words = append(words, shellWord{text: c.Variant.Value, literal: true})
	opts := ""
	for _, a := range c.Args {
		if a == nil || !a.Naked || a.Name != nil {
			continue
		}
		if t, ok := litText(a.Value); ok && (strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+")) {
			opts += t[1:]
		}
	}
	var assigns []envAssignment
	for _, a := range c.Args {
		if a == nil {
			continue
		}
		switch {
		case a.Naked && a.Name == nil && a.Value != nil:
			w := b.convertWord(sc, a.Value, ctxWord)
			words = append(words, w)
			b.declEffects(sc, c.Variant.Value, opts, a, w)
		case a.Name != nil && !a.Naked && a.Index == nil && a.Array == nil:
			v := b.assignValue(sc, a)
			op := "="
			if a.Append {
				op = "+="
			}
			words = append(words, shellWord{text: a.Name.Value + op + v.text, literal: v.literal, subst: v.subst})
			assigns = append(assigns, envAssignment{name: a.Name.Value, value: v})
			b.declEffects(sc, c.Variant.Value, opts, a, v)
		case a.Name != nil || a.Value != nil:
			words = append(words, shellWord{text: nodeSource(sc.src, a), literal: false, subst: hasSubst(a)})
			b.declEffects(sc, c.Variant.Value, opts, a, shellWord{})
		}
	}
	// walkStmt attaches the statement's redirections, as for any compound.
	// The assignments are arguments too (paths come from those); they are
	// also listed as the command's assignments.
	idx := b.addCommand(sc, words, cmdExtra{raw: stmtSource(sc.src, s)})
	for _, a := range assigns {
		b.commands[idx].Assignments[a.name] = a.value.text
	}
	b.walkSubstFor(sc, c, idx)
}

// stdinFeed is what a statement's redirections, or the pipeline element
// before it, feed to its stdin.
type stdinFeed struct {
	subst      bool     // another command's output: < <(…), <<< "$(…)", a heredoc with $(…)
	literal    bool     // text below is all of it
	text       string   // the heredoc or here-string text, when literal
	alts       []string // other texts it may be, when the shell decides (echo -e under sh): all are judged
	redirected bool     // a redirection of the statement gives it
	piped      bool     // the output of the pipeline element before, known exactly
}

// redirects converts a statement's redirections, records them in the
// script, and reports what they feed to stdin (the last stdin
// redirection wins, as in the shell).
func (b *inputBuilder) redirects(sc *shellScope, rs []*syntax.Redirect) ([]shellRedirect, stdinFeed) {
	var feed stdinFeed
	if len(rs) == 0 {
		return nil, feed
	}
	out := make([]shellRedirect, 0, len(rs))
	for _, r := range rs {
		if r == nil || r.Word == nil {
			continue
		}
		op := r.Op.String()
		if r.N != nil {
			op = r.N.Value + op
			if strings.HasPrefix(r.N.Value, "{") {
				sc.vars.forget(strings.Trim(r.N.Value, "{}")) // {fd}> assigns the descriptor
			}
		}
		sc.vars.expansionEffects(r.Word)
		ctx := ctxWord
		if r.Op == syntax.WordHdoc {
			ctx = ctxString // a here-string is neither split nor globbed
		}
		target := b.convertWord(sc, r.Word, ctx)
		rd := shellRedirect{wire: wire.Redirect{Op: op, Target: target.text}, target: target}
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrIn, syntax.RdrInOut, syntax.RdrClob,
			syntax.AppClob, syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
			rd.isPath = !target.procSubst
		case syntax.DplIn, syntax.DplOut:
			rd.isPath = !target.procSubst && !isFD(target.text)
		}
		switch r.Op {
		case syntax.RdrIn, syntax.DplIn:
			rd.role = wire.RoleRead
		default:
			rd.role = wire.RoleWrite
		}
		if r.N == nil || r.N.Value == "0" {
			switch r.Op {
			case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn:
				feed = stdinFeed{subst: target.subst, redirected: true}
			case syntax.WordHdoc:
				feed = stdinFeed{subst: target.subst, literal: target.literal, text: target.text + "\n", redirected: true}
			case syntax.Hdoc, syntax.DashHdoc:
				if r.Hdoc != nil {
					sc.vars.expansionEffects(r.Hdoc)
				}
				feed = heredocFeed(sc.vars, r)
				feed.redirected = true
			}
		}
		out = append(out, rd)
		b.script.Redirects = append(b.script.Redirects, rd.wire)
	}
	return out, feed
}

// heredocFeed returns what a heredoc feeds to stdin. The body is literal
// when the delimiter is quoted, or when it holds no expansion but $X and
// ${X} of variables vars knows; in an unquoted body a backslash escapes
// only $, `, \ and newline.
func heredocFeed(vars *shellVars, r *syntax.Redirect) stdinFeed {
	if r.Hdoc == nil {
		return stdinFeed{literal: true}
	}
	quoted := !plainWord(r.Word) || len(r.Word.Parts) != 1 || strings.IndexByte(r.Word.Lit(), '\\') >= 0
	var sb strings.Builder
	for _, p := range r.Hdoc.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if quoted {
				sb.WriteString(p.Value)
			} else {
				unescapeShell(&sb, p.Value, "$`\\\n")
			}
		case *syntax.ParamExp:
			v, ok := simpleParam(vars, p)
			if !ok || v.glob {
				return stdinFeed{subst: hasSubst(r.Hdoc)}
			}
			sb.WriteString(v.text)
		default:
			return stdinFeed{subst: hasSubst(r.Hdoc)}
		}
	}
	return stdinFeed{literal: true, text: sb.String()}
}

// isFD reports whether the target of >& or <& is a descriptor ("2", "-")
// rather than a file.
func isFD(t string) bool {
	if t == "-" {
		return true
	}
	t = strings.TrimSuffix(t, "-")
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return false
		}
	}
	return true
}

// stmtSource is the source text of a statement without its terminator.
func stmtSource(src string, s *syntax.Stmt) string {
	if s == nil {
		return ""
	}
	start := s.Pos().Offset()
	end := start
	if s.Cmd != nil {
		end = max(end, s.Cmd.End().Offset())
	}
	for _, r := range s.Redirs {
		if r != nil && r.Word != nil {
			end = max(end, r.Word.End().Offset())
		}
	}
	return sourceRange(src, start, end)
}

// nodeSource is the source text of a node.
func nodeSource(src string, n syntax.Node) string {
	return sourceRange(src, n.Pos().Offset(), n.End().Offset())
}

// sourceRange returns src[start:end], or "" when the bounds do not fit.
func sourceRange(src string, start, end uint) string {
	if start > end || end > uint(len(src)) {
		return ""
	}
	return src[start:end]
}

// hasSubst reports whether node contains a command or process substitution.
func hasSubst(node syntax.Node) bool {
	found := false
	syntax.Walk(node, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			found = true
		}
		return !found
	})
	return found
}

// assignValue returns the value of an assignment as a word: expanded
// with the variables of sc, neither split nor globbed.
func (b *inputBuilder) assignValue(sc *shellScope, a *syntax.Assign) shellWord {
	switch {
	case a.Array != nil:
		return shellWord{text: nodeSource(sc.src, a.Array), subst: hasSubst(a.Array)}
	case a.Value != nil:
		return b.convertWord(sc, a.Value, ctxString)
	}
	return shellWord{literal: true}
}

// wordCtx says how the shell expands a word.
type wordCtx uint8

const (
	// ctxWord: a command word, a loop item, a redirection target: the
	// result of an unquoted expansion is split at IFS and globbed.
	ctxWord wordCtx = iota
	// ctxString: an assignment value, a here-string: never split nor
	// globbed, and a glob character is a plain character.
	ctxString
)

// convertWord converts a syntax word: literal words (plain, quoted,
// escaped, $'…') become their value, and so do words whose expansions are
// $X or ${X} of variables sc knows (parse_vars.go); any other word keeps
// its source text. An unquoted expansion in a command word is literal
// only when the shell could neither split nor glob its value (no IFS
// character, no glob character) and the word does not vanish (an empty
// value alone); a brace expansion is not literal here (expandWords
// expands command words first). A word with unquoted glob characters is
// marked glob, and pattern when its text spells the pattern exactly.
func (b *inputBuilder) convertWord(sc *shellScope, w *syntax.Word, ctx wordCtx) shellWord {
	if len(w.Parts) == 1 {
		if l, ok := w.Parts[0].(*syntax.Lit); ok && strings.IndexByte(l.Value, '\\') < 0 && strings.IndexByte(l.Value, '{') < 0 &&
			!(strings.HasPrefix(l.Value, "~") && sc.vars.isMoved("HOME")) {
			out := shellWord{text: l.Value, literal: true}
			if ctx == ctxWord && hasGlobMeta(l.Value) {
				out.glob, out.pattern = true, true
			}
			return out
		}
	}
	var sb strings.Builder
	literal := !hasBraceExpansion(w)
	var (
		quoted     bool // a quoted part: the word stays even when empty
		expanded   bool // an unquoted expansion
		glob       bool // unquoted glob characters
		hidden     bool // glob characters the text does not show as such (quoted, escaped)
		fileName   bool // the value of a variable bound to a glob: a file name
		expandedAt = -1 // bytes of the text that came from expansions, or -1
		rebased    bool // ~, $HOME or $PWD of a HOME or PWD assigned a value not known
	)
	addValue := func(v varValue) {
		expandedAt = max(expandedAt, 0) + len(v.text)
		fileName = fileName || v.glob
		if !v.glob && hasGlobChar(v.text) {
			hidden = true
		}
		sb.WriteString(v.text)
	}
	for i, part := range w.Parts {
		if !literal {
			break
		}
		switch p := part.(type) {
		case *syntax.Lit:
			if ctx == ctxWord {
				g, h := litGlob(w.Parts[i:])
				glob, hidden = glob || g, hidden || h
			}
			lit := p.Value
			if i == 0 && sc.vars.isMoved("HOME") && (lit == "~" || strings.HasPrefix(lit, "~/")) {
				// ~ is the HOME the script assigned.
				if home, ok := sc.vars.lookup("HOME"); ok && !home.glob {
					addValue(home)
					lit = lit[1:]
				} else {
					rebased = true
				}
			}
			unescapeShell(&sb, lit, "")
		case *syntax.SglQuoted:
			quoted = true
			hidden = hidden || hasGlobChar(p.Value)
			if p.Dollar {
				ansiC(&sb, p.Value)
			} else {
				sb.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			quoted = true
			for _, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit:
					hidden = hidden || hasGlobChar(q.Value)
					unescapeShell(&sb, q.Value, "$`\"\\\n")
				case *syntax.ParamExp:
					v, ok := simpleParam(sc.vars, q)
					if !ok {
						rebased = rebased || i == 0 && movedParam(sc.vars, q)
						literal = false
						break
					}
					addValue(v)
				default:
					literal = false
				}
			}
		case *syntax.ParamExp:
			v, ok := simpleParam(sc.vars, p)
			if !ok || ctx == ctxWord && !splitSafe(sc.vars, v) {
				rebased = rebased || i == 0 && movedParam(sc.vars, p)
				literal = false
				break
			}
			expanded = true
			addValue(v)
		default:
			literal = false
		}
	}
	if literal && expandedAt >= 0 {
		switch {
		case ctx == ctxWord && expanded && !quoted && sb.Len() == 0:
			literal = false // the word vanishes: the next one is the program
		case ctx == ctxWord && fileName && (glob || hidden):
			literal = false // a file name mixed with a pattern
		case b.static.expanded+expandedAt > maxExpandBytes:
			literal = false
		default:
			b.static.expanded += expandedAt
		}
	}
	if literal {
		out := shellWord{text: sb.String(), literal: true, rebased: rebased}
		if ctx == ctxWord && (glob || fileName) {
			out.glob = true
			out.pattern = glob && !hidden && !fileName
		} else if ctx == ctxString && fileName {
			out.glob = true // a file name, kept in a variable
		}
		return out
	}
	out := shellWord{text: nodeSource(sc.src, w), subst: hasSubst(w), rebased: rebased}
	if len(w.Parts) == 1 {
		_, out.procSubst = w.Parts[0].(*syntax.ProcSubst)
	}
	return out
}

// movedParam reports whether p is $HOME or $PWD (any form) of a base
// variable the script assigned a value the parser does not know.
func movedParam(vars *shellVars, p *syntax.ParamExp) bool {
	return p.Param != nil && baseVars[p.Param.Value] && vars.baseUnknown(p.Param.Value)
}

// simpleParam returns the value of $X or ${X} when vars knows X; any
// other parameter expansion (${X:-d}, ${#X}, $1, $@) is unknown.
func simpleParam(vars *shellVars, p *syntax.ParamExp) (varValue, bool) {
	if p.Param == nil || p.Excl || p.Length || p.Width || p.IsSet || p.Flags != nil || p.NestedParam != nil ||
		p.Index != nil || p.Slice != nil || p.Repl != nil || p.Names != 0 || p.Exp != nil || len(p.Modifiers) > 0 ||
		p.Split != syntax.OptUnset || p.GlobSubst != syntax.OptUnset || p.RcExpand != syntax.OptUnset {
		return varValue{}, false
	}
	return vars.lookup(p.Param.Value)
}

// splitSafe reports whether an unquoted expansion of v gives exactly v:
// IFS is known and v holds none of its characters, nor a glob
// character (or a backslash, which bash may take for one); a file name
// bound by a glob loop may hold anything.
func splitSafe(vars *shellVars, v varValue) bool {
	ifs, ok := vars.lookup("IFS")
	return ok && !v.glob && !ifs.glob && !strings.ContainsAny(v.text, ifs.text) && !hasGlobChar(v.text) &&
		strings.IndexByte(v.text, '\\') < 0
}

// globChars are the characters that may make a word a pattern: *, ?,
// […], and the ( of extglob's @(…), +(…), !(…).
const globChars = "*?[("

// hasGlobChar reports whether s holds a character that may start a
// pattern.
func hasGlobChar(s string) bool {
	return strings.ContainsAny(s, globChars)
}

// hasGlobMeta reports whether the unquoted, unescaped text s is a
// pattern: * or ?, or a [ closed by a ] after it.
func hasGlobMeta(s string) bool {
	g, _ := litGlob([]syntax.WordPart{&syntax.Lit{Value: s}})
	return g
}

// litGlob reports whether parts[0], an unquoted literal, holds glob
// characters the shell expands (* and ?, or a [ closed by a ] later in
// the word), and whether it holds escaped ones, which its unquoted text
// no longer shows.
func litGlob(parts []syntax.WordPart) (glob, escaped bool) {
	s := parts[0].(*syntax.Lit).Value
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) && strings.IndexByte(globChars, s[i+1]) >= 0 {
				escaped = true
			}
			i++
		case '*', '?':
			glob = true
		case '[':
			if strings.IndexByte(s[i+1:], ']') >= 0 {
				glob = true
				break
			}
			for _, p := range parts[1:] {
				if l, ok := p.(*syntax.Lit); ok && strings.IndexByte(l.Value, ']') >= 0 {
					glob = true
				}
			}
		}
	}
	return glob, escaped
}

// hasBraceExpansion reports whether w holds a brace expansion ({a,b},
// {1..3}): its words are only known after expansion ({..,x}/etc can give
// ../etc), so it is not a literal.
func hasBraceExpansion(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.IndexByte(l.Value, '{') >= 0 {
			cp := syntax.Word{Parts: slices.Clone(w.Parts)}
			syntax.SplitBraces(&cp) // also splits "{}" and "{a}", which do not expand
			return slices.ContainsFunc(cp.Parts, func(p syntax.WordPart) bool {
				_, ok := p.(*syntax.BraceExp)
				return ok
			})
		}
	}
	return false
}

// unescapeShell writes s with backslash escapes removed. With only == "" every
// character can be escaped (unquoted text); otherwise only those in only
// (double-quoted text) and the backslash stays before any other.
func unescapeShell(sb *strings.Builder, s, only string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) && (only == "" || strings.IndexByte(only, s[i+1]) >= 0) {
			i++
			c = s[i]
		}
		sb.WriteByte(c)
	}
}

// ansiC writes the value of a bash $'…' string, decoding its escapes.
func ansiC(sb *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			sb.WriteByte('\a')
		case 'b':
			sb.WriteByte('\b')
		case 'e', 'E':
			sb.WriteByte(0x1b)
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'v':
			sb.WriteByte('\v')
		case '\\', '\'', '"', '?':
			sb.WriteByte(e)
		case 'c':
			if i+1 < len(s) {
				i++
				sb.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			width := 2
			if e == 'u' {
				width = 4
			} else if e == 'U' {
				width = 8
			}
			v, n := parseHex(s[i+1:], width)
			if n == 0 {
				sb.WriteByte('\\')
				sb.WriteByte(e)
				break
			}
			i += n
			if e == 'x' {
				sb.WriteByte(byte(v))
			} else {
				sb.WriteRune(rune(v))
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, n := 0, 0
			for n < 3 && i+n < len(s) && s[i+n] >= '0' && s[i+n] <= '7' {
				v = v*8 + int(s[i+n]-'0')
				n++
			}
			i += n - 1
			sb.WriteByte(byte(v))
		default:
			sb.WriteByte('\\')
			sb.WriteByte(e)
		}
	}
}

// parseHex reads up to width hex digits from the start of s.
func parseHex(s string, width int) (v, n int) {
	for n < width && n < len(s) {
		c := s[n]
		var d int
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int(c-'A') + 10
		default:
			return v, n
		}
		v = v*16 + d
		n++
	}
	return v, n
}
