package engine

import (
	"cmp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"avfs/wire"
)

// pipeOutput returns what the pipeline element s (walked in sc) writes to
// the next one when the parser can compute it exactly, or nil: echo or
// printf with literal words, cat of a literal heredoc or here-string, or
// cat passing on what the element before it wrote (sc.pipeFeed). A shell
// reading its program from stdin after it then runs that text, which is
// parsed (see addCommand). It is nil when the element has another
// redirection of its stdout, a word that is not literal or a glob, runs
// in the background, when echo, printf or cat is a function of the
// script, or when the table of variables is off (a sourced file may have
// defined one), or after shopt (xpg_echo changes echo). Bash's echo and
// POSIX's (dash) differ on options and escapes: when the shell is not
// known to be bash and they disagree, every text it may write is
// returned (text and alts), and all are judged.
func (b *inputBuilder) pipeOutput(sc *shellScope, s *syntax.Stmt) *stdinFeed {
	c, ok := stmtCmd(s).(*syntax.CallExpr)
	if !ok || s.Background || s.Negated || len(c.Args) == 0 || sc.vars.globsUnsure() {
		return nil
	}
	var in *stdinFeed
	for _, r := range s.Redirs {
		switch {
		case r.N != nil && r.N.Value == "2" && (r.Op == syntax.RdrOut || r.Op == syntax.AppOut || r.Op == syntax.DplOut):
			// stderr: not what the next element reads
		case r.N == nil && (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc):
			f := heredocFeed(sc.vars, r)
			in = &f
		case r.N == nil && r.Op == syntax.WordHdoc:
			t := b.convertWord(sc, r.Word, ctxString)
			in = &stdinFeed{literal: t.literal, text: t.text + "\n"}
		default:
			return nil
		}
	}
	words := b.expandWords(sc, c.Args)
	for _, w := range words {
		if !w.literal || w.glob {
			return nil
		}
	}
	name, args := words[0].text, words[1:]
	if b.isFunction(name) {
		return nil
	}
	var out stdinFeed
	switch name {
	case "echo":
		if in != nil {
			return nil
		}
		texts := echoOutputs(args, sc.shell)
		if len(texts) == 0 {
			return nil
		}
		out.text, out.alts = texts[0], texts[1:]
	case "printf":
		t, ok := printfOutput(args)
		if in != nil || !ok {
			return nil
		}
		out.text = t
	case "cat":
		if len(args) > 1 || len(args) == 1 && args[0].text != "-" {
			return nil
		}
		if in == nil {
			in = sc.pipeFeed // cat passes its stdin on
		}
		if in == nil || !in.literal {
			return nil
		}
		out = *in
	default:
		return nil
	}
	out.literal, out.piped, out.subst, out.redirected = true, true, false, false
	return &out
}

// echoShells are the shells whose echo echoOutputs computes; the value
// says whether it is bash's echo (options -n, -e, -E; escapes with -e
// only), POSIX's (dash: only -n, escapes always), or possibly either
// (sh, which is dash or bash, maybe built with xpg_echo on, and --shell,
// run by /bin/sh).
var echoShells = map[string]echoKind{
	"": echoEither, "sh": echoEither, "bash": echoBash, "rbash": echoBash,
	"dash": echoPOSIX, "ash": echoPOSIX,
}

type echoKind uint8

const (
	echoEither echoKind = iota
	echoBash            // bash's builtin
	echoXPG             // bash's builtin with xpg_echo: escapes unless -E
	echoPOSIX           // dash's
)

// echoOutputs returns what echo ARGS… writes under shell: the texts it may
// write (one when bash, dash and xpg_echo agree), or none when the
// parser cannot compute it exactly: an escape other than \\, \a, \b, \c,
// \f, \n, \r, \t, \v and \0NNN, or a shell whose echo it does not know.
func echoOutputs(args []shellWord, shell string) []string {
	kind, ok := echoShells[shell]
	if !ok {
		return nil
	}
	var texts []string
	for _, k := range [3]echoKind{echoBash, echoPOSIX, echoXPG} {
		if kind != echoEither && kind != k {
			continue
		}
		t, ok := echoText(args, k)
		if !ok {
			return nil
		}
		if !slices.Contains(texts, t) {
			texts = append(texts, t)
		}
	}
	return texts
}

// echoText is what echo writes under one kind of echo.
func echoText(args []shellWord, kind echoKind) (string, bool) {
	newline, escapes := true, kind != echoBash
	i := 0
	for ; i < len(args); i++ {
		t := args[i].text
		if kind == echoPOSIX {
			if i == 0 && t == "-n" {
				newline = false
				continue
			}
			break
		}
		if len(t) < 2 || t[0] != '-' || strings.Trim(t[1:], "neE") != "" {
			break
		}
		for _, c := range t[1:] {
			switch c {
			case 'n':
				newline = false
			case 'e':
				escapes = true
			case 'E':
				escapes = false
			}
		}
	}
	var sb strings.Builder
	for j, a := range args[i:] {
		if j > 0 {
			sb.WriteByte(' ')
		}
		if !escapes {
			sb.WriteString(a.text)
			continue
		}
		stop, ok := writeEscapes(&sb, a.text, escZeroOctal|escStop)
		if !ok {
			return "", false
		}
		if stop {
			return sb.String(), true
		}
	}
	if newline {
		sb.WriteByte('\n')
	}
	return sb.String(), sb.Len() <= maxWordBytes
}

// Escapes writeEscapes reads besides \\, \a, \b, \f, \n, \r, \t, \v.
const (
	escZeroOctal = 1 << iota // \0NNN: octal, up to three digits after the 0 (echo, %b)
	escOctal                 // \NNN: octal, one to three digits (printf's format, %b)
	escStop                  // \c: nothing more is written (echo, %b)
	escQuote                 // \": a double quote (printf's format)
)

// writeEscapes writes s to sb with its backslash escapes decoded, those
// that bash and dash decode alike; it reports false for any other
// escape, and stop when \c ended the output.
func writeEscapes(sb *strings.Builder, s string, allowed int) (stop, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			sb.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			return false, false
		}
		i++
		if v, ok := simpleEscapes[s[i]]; ok {
			sb.WriteByte(v)
			continue
		}
		switch e := s[i]; {
		case e == '0' && allowed&escZeroOctal != 0:
			v, n := octal(s[i+1:])
			sb.WriteByte(byte(v))
			i += n
		case e >= '0' && e <= '7' && allowed&escOctal != 0:
			v, n := octal(s[i:])
			sb.WriteByte(byte(v))
			i += n - 1
		case e == 'c' && allowed&escStop != 0:
			return true, true
		case e == '"' && allowed&escQuote != 0:
			sb.WriteByte('"')
		default:
			return false, false
		}
	}
	return false, true
}

// simpleEscapes are the one-letter escapes bash and dash decode alike.
var simpleEscapes = map[byte]byte{'\\': '\\', 'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}

// octal reads up to three octal digits from the start of s.
func octal(s string) (v, n int) {
	for n < 3 && n < len(s) && s[n] >= '0' && s[n] <= '7' {
		v = v*8 + int(s[n]-'0')
		n++
	}
	return v & 0xff, n
}

// printfOutput returns what printf FORMAT ARGS… writes, when the parser
// can compute it exactly: the format's text with its escapes, and %s,
// %b and %% conversions, reusing the format while arguments remain (a
// missing argument is empty). Any other conversion (%d, widths, %q …),
// an option (-v), or an escape bash and dash may read differently gives
// false.
func printfOutput(args []shellWord) (string, bool) {
	if len(args) > 0 && args[0].text == "--" {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0].text, "-") {
		return "", false
	}
	format, rest := args[0].text, args[1:]
	var sb strings.Builder
	for {
		convs := 0
		for i := 0; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '\\':
				j := i + 1
				for j < len(format) && j < i+4 && format[j] >= '0' && format[j] <= '7' {
					j++
				}
				if j == i+1 {
					j = i + 2
				}
				if j > len(format) {
					return "", false
				}
				if _, ok := writeEscapes(&sb, format[i:j], escOctal|escQuote); !ok {
					return "", false
				}
				i = j - 1
			case c != '%':
				sb.WriteByte(c)
			case i+1 >= len(format):
				return "", false
			default:
				i++
				switch format[i] {
				case '%':
					sb.WriteByte('%')
					continue
				case 's', 'b':
				default:
					return "", false
				}
				convs++
				arg := ""
				if len(rest) > 0 {
					arg, rest = rest[0].text, rest[1:]
				}
				if format[i] == 's' {
					sb.WriteString(arg)
				} else if stop, ok := writeEscapes(&sb, arg, escZeroOctal|escOctal|escStop); !ok {
					return "", false
				} else if stop {
					return sb.String(), true
				}
			}
			if sb.Len() > maxWordBytes {
				return "", false
			}
		}
		if convs == 0 || len(rest) == 0 {
			return sb.String(), true
		}
	}
}

// xargsRunsInput reports whether a command run by xargs is a shell or
// interpreter whose program comes from xargs's input: its code option
// has no operand (xargs sh -c, which takes the first input word), or
// the code holds xargs's replace string (xargs -I{} sh -c '{}').
func xargsRunsInput(cmd *wire.Command, in interpResult, args []shellWord) bool {
	if cmd.Origin != originXargs || !in.shell && interpreterFor(cmd.Program) == nil {
		return false
	}
	if in.codeMissing {
		return true
	}
	if in.code < 0 {
		return false
	}
	for _, w := range cmd.Wrappers {
		if w.Name != "xargs" {
			continue
		}
		repl, ok := w.FlagValues["-I"]
		if !ok && slices.Contains(w.Flags, "-i") {
			repl = cmp.Or(w.FlagValues["-i"], "{}")
		}
		if repl != "" && strings.Contains(args[in.code].text, repl) {
			return true
		}
	}
	return false
}
