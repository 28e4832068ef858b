package engine

import (
	"strings"

	"avfs/wire"
)

// nestedRun is something a command runs that its words hold: shell code
// (a value or operand of role shell) or an argv (operands of role command).
type nestedRun struct {
	script *shellWord  // shell code, parsed as a script run by sh
	argv   []shellWord // a command's words
}

// specOperand is an operand found while classifying by spec.
type specOperand struct {
	word shellWord
	own  bool // the command's own word (not skipped: find -exec …)
}

// classifyBySpec fills the command's flags, flag values and operands from
// args as the program's spec says, records every word whose role is a
// path (with that role) and returns what the words make the program run.
// Words of the roles text, pattern, code and url (other than file://) are
// never paths, whatever their shape; words without a role (an unlisted
// long option's value, operands past the spec's list) are judged by their
// shape as classifyByShape does. skip marks words that are not the
// command's own (find -exec …): they are recorded as flags or operands
// and nothing else. It never consumes more words than args holds.
func (b *inputBuilder) classifyBySpec(cmd *wire.Command, spec *ProgramSpec, args []shellWord, in interpResult, skip []bool, dir dirState, idx int) []nestedRun {
	cur := spec
	var level []specOperand // operands of the current (sub)command
	var nested []nestedRun
	var operandRole ArgRole
	fills := 0
	endOfOptions := false
	// value records the value v of option opt (role r).
	value := func(opt string, v shellWord, r ArgRole, first bool) {
		if first {
			cmd.FlagValues[opt] = v.text
		}
		b.specWord(cmd, v, r, dir, idx, &nested)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		t := a.text
		own := (skip == nil || !skip[i]) && !in.isCode(i)
		isOpt := !endOfOptions && (len(t) >= 2 && t[0] == '-' && (isFlagChar(t[1]) || t[1] == '-' || !a.literal) ||
			a.literal && cur.isOptionWord(t))
		switch {
		case !own:
			if isOpt {
				cmd.Flags = append(cmd.Flags, t)
			} else {
				cmd.Operands = append(cmd.Operands, t)
				level = append(level, specOperand{word: a})
			}
			continue
		case !isOpt:
		case t == "--":
			endOfOptions = true
			continue
		case !a.literal || t[0] != '-':
			cmd.Flags = append(cmd.Flags, t)
			continue
		default:
			name, attached, hasValue := strings.Cut(t, "=")
			full, o := cur.option(name)
			long := strings.HasPrefix(t, "--") || cur.longOnly()
			if o == nil && long && !strings.HasPrefix(t, "--") && len(t) > 2 {
				// cc -I/usr/include: a two-letter option with its value attached.
				if _, so := cur.option(t[:2]); so != nil && len(so.Values) > 0 {
					full, o, attached, hasValue = t[:2], so, t[2:], true
				}
			}
			if o == nil && (long || !isFlagChar(t[1])) {
				// An unlisted long option: a flag, its value judged by the
				// spec's unlisted role or by its shape.
				cmd.Flags = append(cmd.Flags, name)
				if hasValue {
					value(name, shellWord{text: attached, literal: true}, cur.unlisted(), true)
				}
				continue
			}
			if o != nil {
				cmd.Flags = append(cmd.Flags, full)
				i = b.optionValues(full, o, args, i, attached, hasValue, value)
				if o.OperandRole != "" {
					operandRole = o.OperandRole
				}
				if o.Fills {
					fills++
				}
				continue
			}
			// A cluster of short options: -rn, -d/, -ofile.
			for j := 1; j < len(t); j++ {
				c := t[j]
				flag := shortFlag(c)
				if flag == "" || !isFlagChar(c) {
					// What follows an unlisted letter is its value, judged by shape.
					last := shortFlag(t[j-1])
					if j > 1 && last != "" {
						value(last, shellWord{text: strings.TrimPrefix(t[j:], "="), literal: true}, "", true)
					}
					break
				}
				cmd.Flags = append(cmd.Flags, flag)
				_, so := cur.option(flag)
				if so == nil {
					continue
				}
				if so.OperandRole != "" {
					operandRole = so.OperandRole
				}
				if so.Fills {
					fills++
				}
				if len(so.Values) == 0 {
					continue
				}
				rest := t[j+1:]
				i = b.optionValues(flag, so, args, i, rest, rest != "", value)
				break
			}
			continue
		}
		// An operand: a subcommand, the start of a command, or one of the
		// (sub)command's operands.
		if len(level) == 0 && a.literal && cur.Subcommands[t] != nil {
			cmd.Operands = append(cmd.Operands, t)
			cur = cur.Subcommands[t]
			fills, operandRole = 0, ""
			continue
		}
		roles := cur.operandRoles(len(level)+1, fills)
		if roles[len(level)] == ArgCommand {
			for _, w := range args[i:] {
				cmd.Operands = append(cmd.Operands, w.text)
			}
			nested = append(nested, nestedRun{argv: args[i:]})
			break
		}
		cmd.Operands = append(cmd.Operands, t)
		level = append(level, specOperand{word: a, own: true})
		if cur.OptionsFirst {
			endOfOptions = true
		}
	}
	cmd.Spec = cur.name
	roles := cur.operandRoles(len(level), fills)
	for k, op := range level {
		if !op.own {
			continue
		}
		r := roles[k]
		if operandRole != "" && r.isPath() {
			r = operandRole
		}
		if kr, ok := b.keyRole(cur, op.word); ok {
			v, _ := assignmentValue(op.word)
			b.specWord(cmd, v, kr, dir, idx, &nested)
			continue
		}
		if r == "" && in.file >= 0 && args[in.file].text == op.word.text {
			r = ArgExecute
		}
		b.specWord(cmd, op.word, r, dir, idx, &nested)
	}
	return nested
}

// optionValues takes the values of option o (name opt) given at args[i]:
// the attached one when hasValue, then as many following words as it
// takes. It returns the index of the last word used.
func (b *inputBuilder) optionValues(opt string, o *OptionSpec, args []shellWord, i int, attached string, hasValue bool,
	value func(string, shellWord, ArgRole, bool)) int {
	vals := o.Values
	if len(vals) == 0 {
		return i
	}
	if hasValue {
		value(opt, shellWord{text: attached, literal: args[i].literal}, vals[0], true)
		vals = vals[1:]
	} else if o.Optional {
		return i
	}
	first := !hasValue
	for _, r := range vals {
		if i+1 >= len(args) {
			break
		}
		i++
		value(opt, args[i], r, first)
		first = false
	}
	return i
}

// keyRole returns the role a spec's Keys give the value of a NAME=VALUE operand.
func (b *inputBuilder) keyRole(s *ProgramSpec, w shellWord) (ArgRole, bool) {
	if !isAssignment(w.text) {
		return "", false
	}
	key, _, _ := strings.Cut(w.text, "=")
	for sp := s; sp != nil; sp = sp.parent {
		if r, ok := sp.Keys[key]; ok {
			return r, true
		}
	}
	return "", false
}

// specWord records what a word of role r is: a path with its role, shell
// code to parse, or nothing. A word without a role is a path when it has
// the shape of one (looksLikePath, or a NAME=VALUE whose value has).
func (b *inputBuilder) specWord(cmd *wire.Command, w shellWord, r ArgRole, dir dirState, idx int, nested *[]nestedRun) {
	switch {
	case r.isPath():
		if w.text == "" || w.text == "-" || w.text == "{}" || isStdinFile(w.text) || w.procSubst {
			return // stdin, the name xargs -I and find -exec put in, or a pipe (<(…), whose commands are judged)
		}
		b.addRolePath(w, dir, sourceArg, idx, r.pathRole())
	case r == ArgURL:
		if strings.HasPrefix(w.text, "file://") {
			b.addRolePath(w, dir, sourceArg, idx, wire.RoleRead)
		}
	case r == ArgRemote:
		if looksLikePath(w) && !isRemote(w.text) {
			b.addRolePath(w, dir, sourceArg, idx, wire.RoleUnknown)
		}
	case r == ArgCode:
		cmd.Code = append(cmd.Code, w.text)
	case r == ArgShell:
		ww := w
		*nested = append(*nested, nestedRun{script: &ww})
	case r == "":
		if v, ok := assignmentValue(w); ok {
			// make DESTDIR=/x: the value is the path.
			if looksLikePath(v) {
				b.addPath(v, dir, sourceArg, idx)
			}
		} else if looksLikePath(w) {
			b.addPath(w, dir, sourceArg, idx)
		}
	}
}

// isRemote reports whether t is host:path or user@host:path (a colon
// before any slash, not a URL), or host::module and rsync:// of rsync.
func isRemote(t string) bool {
	if isURL(t) {
		return !strings.HasPrefix(t, "file://")
	}
	colon := strings.IndexByte(t, ':')
	slash := strings.IndexByte(t, '/')
	return colon > 0 && (slash < 0 || colon < slash)
}
