package engine

import (
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
	for _, r := range s.Redirs {
		if r.Word != nil {
			b.walkSubst(sc, r.Word)
		}
		if r.Hdoc != nil {
			b.walkSubst(sc, r.Hdoc) // a heredoc body is not a command, but $(…) in it runs
		}
	}
}

// callExpr records a simple command: its words after expansion markers are
// resolved, then the substitutions inside its words.
func (b *inputBuilder) callExpr(sc *shellScope, s *syntax.Stmt, c *syntax.CallExpr, redirs []shellRedirect, feed stdinFeed) {
	plain := true // no word can hold a substitution
	assigns := make([]envAssignment, 0, len(c.Assigns))
	for _, a := range c.Assigns {
		if a != nil && a.Name != nil {
			v := b.assignValue(sc.src, a)
			plain = plain && v.literal && a.Index == nil
			assigns = append(assigns, envAssignment{name: a.Name.Value, value: v})
		}
	}
	if len(c.Args) == 0 {
		b.addBare(sc, s, assigns, redirs)
	} else {
		words := make([]shellWord, len(c.Args))
		for i, w := range c.Args {
			words[i] = b.convertWord(sc.src, w)
			plain = plain && words[i].literal
		}
		b.addCommand(sc, words, cmdExtra{raw: stmtSource(sc.src, s), assigns: assigns, redirs: redirs, stdin: feed})
	}
	if !plain || len(assigns) != len(c.Assigns) {
		b.walkSubst(sc, c)
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

// compound records the commands inside a compound command.
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
			b.walkStmt(sc, c.Y)
		}
	case *syntax.IfClause:
		for ; c != nil; c = c.Else {
			b.walkStmts(sc, c.Cond)
			b.walkStmts(sc, c.Then)
		}
	case *syntax.WhileClause:
		b.walkStmts(sc, c.Cond)
		b.walkStmts(sc, c.Do)
	case *syntax.ForClause:
		if c.Loop != nil {
			b.walkSubst(sc, c.Loop)
		}
		b.walkStmts(sc, c.Do)
	case *syntax.CaseClause:
		if c.Word != nil {
			b.walkSubst(sc, c.Word)
		}
		for _, item := range c.Items {
			for _, p := range item.Patterns {
				b.walkSubst(sc, p)
			}
			b.walkStmts(sc, item.Stmts)
		}
	case *syntax.FuncDecl:
		if c.Name != nil {
			b.function(c.Name.Value)
		}
		for _, n := range c.Names {
			b.function(n.Value)
		}
		body := sc.child()
		body.pipe, body.pipeLen, body.pipeReader = 0, 1, false
		b.walkStmt(&body, c.Body)
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
		sub := sc.child()
		b.walkStmt(&sub, c.Stmt)
	default:
		// (( … )), [[ … ]], let: no command, but $(…) inside them runs.
		b.walkSubst(sc, c)
	}
}

// stmtCmd returns s.Cmd, or nil for a nil statement.
func stmtCmd(s *syntax.Stmt) syntax.Command {
	if s == nil {
		return nil
	}
	return s.Cmd
}

// child returns the scope of a subshell: same origin, own directory.
func (sc *shellScope) child() shellScope {
	c := *sc
	d := *sc.dir
	c.dir = &d
	return c
}

// pipeline records the commands of `a | b | c`. Every element runs in its
// own subshell; every element after the first reads the one before it.
func (b *inputBuilder) pipeline(sc *shellScope, c *syntax.BinaryCmd) {
	var elems []*syntax.Stmt
	elems = flattenPipeline(c.X, elems)
	elems = flattenPipeline(c.Y, elems)
	for i, e := range elems {
		sub := sc.child()
		sub.pipe, sub.pipeLen = i, len(elems)
		sub.pipeReader = sc.pipeReader || i > 0
		b.walkStmt(&sub, e)
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
// without entering the substitutions' own statements twice.
func (b *inputBuilder) walkSubst(sc *shellScope, node syntax.Node) {
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
		sub.pipe, sub.pipeLen, sub.pipeReader = 0, 1, false
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
func (b *inputBuilder) declClause(sc *shellScope, s *syntax.Stmt, c *syntax.DeclClause) {
	words := make([]shellWord, 0, 1+len(c.Args))
	words = append(words, shellWord{text: c.Variant.Value, literal: true})
	var assigns []envAssignment
	for _, a := range c.Args {
		if a == nil {
			continue
		}
		switch {
		case a.Naked && a.Name == nil && a.Value != nil:
			words = append(words, b.convertWord(sc.src, a.Value))
		case a.Name != nil && !a.Naked && a.Index == nil && a.Array == nil:
			v := b.assignValue(sc.src, a)
			op := "="
			if a.Append {
				op = "+="
			}
			words = append(words, shellWord{text: a.Name.Value + op + v.text, literal: v.literal, subst: v.subst})
			assigns = append(assigns, envAssignment{name: a.Name.Value, value: v})
		case a.Name != nil || a.Value != nil:
			words = append(words, shellWord{text: nodeSource(sc.src, a), literal: false, subst: hasSubst(a)})
		}
	}
	// walkStmt attaches the statement's redirections, as for any compound.
	// The assignments are arguments too (paths come from those); they are
	// also listed as the command's assignments.
	idx := b.addCommand(sc, words, cmdExtra{raw: stmtSource(sc.src, s)})
	for _, a := range assigns {
		b.commands[idx].Assignments[a.name] = a.value.text
	}
	b.walkSubst(sc, c)
}

// stdinFeed is what a statement's redirections feed to its stdin.
type stdinFeed struct {
	subst   bool   // another command's output: < <(…), <<< "$(…)", a heredoc with $(…)
	literal bool   // text below is all of it
	text    string // the heredoc or here-string text, when literal
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
		}
		target := b.convertWord(sc.src, r.Word)
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
				feed = stdinFeed{subst: target.subst}
			case syntax.WordHdoc:
				feed = stdinFeed{subst: target.subst, literal: target.literal, text: target.text + "\n"}
			case syntax.Hdoc, syntax.DashHdoc:
				feed = heredocFeed(r)
			}
		}
		out = append(out, rd)
		b.script.Redirects = append(b.script.Redirects, rd.wire)
	}
	return out, feed
}

// heredocFeed returns what a heredoc feeds to stdin. The body is literal
// when the delimiter is quoted, or when it holds no expansion; in an
// unquoted body a backslash escapes only $, `, \ and newline.
func heredocFeed(r *syntax.Redirect) stdinFeed {
	if r.Hdoc == nil {
		return stdinFeed{literal: true}
	}
	quoted := !plainWord(r.Word) || len(r.Word.Parts) != 1 || strings.IndexByte(r.Word.Lit(), '\\') >= 0
	var sb strings.Builder
	for _, p := range r.Hdoc.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok {
			return stdinFeed{subst: hasSubst(r.Hdoc)}
		}
		if quoted {
			sb.WriteString(l.Value)
		} else {
			unescapeShell(&sb, l.Value, "$`\\\n")
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

// assignValue returns the value of an assignment as a word.
func (b *inputBuilder) assignValue(src string, a *syntax.Assign) shellWord {
	switch {
	case a.Array != nil:
		return shellWord{text: nodeSource(src, a.Array), subst: hasSubst(a.Array)}
	case a.Value != nil:
		return b.convertWord(src, a.Value)
	}
	return shellWord{literal: true}
}

// convertWord converts a syntax word: literal words (plain, quoted, escaped,
// $'…') become their value; any other word keeps its source text.
func (b *inputBuilder) convertWord(src string, w *syntax.Word) shellWord {
	if len(w.Parts) == 1 {
		if l, ok := w.Parts[0].(*syntax.Lit); ok && strings.IndexByte(l.Value, '\\') < 0 && strings.IndexByte(l.Value, '{') < 0 {
			return shellWord{text: l.Value, literal: true}
		}
	}
	var sb strings.Builder
	literal := !hasBraceExpansion(w)
	for _, part := range w.Parts {
		if !literal {
			break
		}
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
					literal = false
					break
				}
				unescapeShell(&sb, l.Value, "$`\"\\\n")
			}
		default:
			literal = false
		}
	}
	if literal {
		return shellWord{text: sb.String(), literal: true}
	}
	out := shellWord{text: nodeSource(src, w), subst: hasSubst(w)}
	if len(w.Parts) == 1 {
		_, out.procSubst = w.Parts[0].(*syntax.ProcSubst)
	}
	return out
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
