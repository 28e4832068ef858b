package hooks

import (
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// ParseRewrite reads back a command Rewrite made for the avfs binary exe
// and the avfs serve socket server ("" for none): the vault, the command
// and the approval id. ok is false for anything
// else — another program, more than one simple command, redirections,
// expansions, or any difference at all from what Rewrite writes for
// those values, a --server other than server — so that a command that merely starts like a rewrite
// (`avfs … --shell 'ls'; rm -rf ~`) is never taken for one.
func ParseRewrite(exe, server, command string) (vault string, c Command, approvalID string, ok bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(command), "")
	if err != nil || len(f.Stmts) != 1 {
		return "", Command{}, "", false
	}
	st := f.Stmts[0]
	call, isCall := st.Cmd.(*syntax.CallExpr)
	if !isCall || st.Negated || st.Background || st.Coprocess || st.Disown || len(st.Redirs) > 0 || len(call.Assigns) > 0 {
		return "", Command{}, "", false
	}
	args := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		// Only literal words: unquoted text (a backslash quotes the next
		// character) and '…'. The final comparison with Rewrite's own
		// output rejects any spelling Rewrite does not write.
		var b strings.Builder
		for _, p := range w.Parts {
			switch p := p.(type) {
			case *syntax.Lit:
				v := p.Value
				for i := 0; i < len(v); i++ {
					if v[i] == '\\' && i+1 < len(v) {
						i++
					}
					b.WriteByte(v[i])
				}
			case *syntax.SglQuoted:
				if p.Dollar {
					return "", Command{}, "", false
				}
				b.WriteString(p.Value)
			default:
				return "", Command{}, "", false
			}
		}
		args = append(args, b.String())
	}
	// exe --vault V --json proxy exec [--server S] --cwd C [--timeout T] [--approval A] --shell S
	if len(args) < 10 || args[0] != exe || args[1] != "--vault" || args[3] != "--json" || args[4] != "proxy" || args[5] != "exec" {
		return "", Command{}, "", false
	}
	vault, rest := args[2], args[6:]
	if server != "" {
		if len(rest) < 2 || rest[0] != "--server" || rest[1] != server {
			return "", Command{}, "", false
		}
		c.Server, rest = server, rest[2:]
	}
	if len(rest) < 2 || rest[0] != "--cwd" {
		return "", Command{}, "", false
	}
	c.Cwd, rest = rest[1], rest[2:]
	if len(rest) >= 2 && rest[0] == "--timeout" {
		d, err := time.ParseDuration(rest[1])
		if err != nil || d <= 0 {
			return "", Command{}, "", false
		}
		c.Timeout, rest = d, rest[2:]
	}
	if len(rest) >= 2 && rest[0] == "--approval" {
		approvalID, rest = rest[1], rest[2:]
	}
	if len(rest) != 2 || rest[0] != "--shell" {
		return "", Command{}, "", false
	}
	c.Script, c.Vault = rest[1], vault
	if Rewrite(exe, vault, c, approvalID) != command {
		return "", Command{}, "", false
	}
	return vault, c, approvalID, true
}
