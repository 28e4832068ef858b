package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"avfs/policies"
	"avfs/wire"
)

// A program spec is what the parser knows about one program's words: which
// options take a value and what that value is, which words are
// subcommands, and what each operand is to the program — a path it reads
// or writes, a pattern, code in its own language, a shell command line, a
// command it runs, a URL. Specs are data: the default bundle's
// data.avfs.programs (policies/avfs/programs/data.json) and, for each
// extension bundle, data.extensions.NAME.programs, whose entries replace
// the default's program by program. docs/policy.md ("Program specs")
// documents the format; ReadPrograms checks it.

// ArgRole is what one word is to the program that gets it (an operand, or
// an option's value). The path roles make the word a path whatever its
// shape; the others make it no path whatever its shape.
type ArgRole string

// Roles of spec words.
const (
	ArgRead    ArgRole = "read"    // a path the program reads
	ArgWrite   ArgRole = "write"   // a path the program creates, changes or removes
	ArgPath    ArgRole = "path"    // a path, read or written
	ArgExecute ArgRole = "execute" // a file whose content the program runs as code (make -f FILE)
	ArgText    ArgRole = "text"    // no path: a value, a name, a number, a separator, a message
	ArgPattern ArgRole = "pattern" // no path: a regular expression or glob matched against names or text
	ArgCode    ArgRole = "code"    // no path: program text in the program's own language (sed, awk, jq)
	ArgURL     ArgRole = "url"     // no path: a URL or host the program connects to (file:// URLs are paths it reads)
	ArgRemote  ArgRole = "remote"  // host:path is a remote, anything else a local path (scp, rsync)
	ArgShell   ArgRole = "shell"   // shell code, or a command line, the program runs: parsed as a script
	ArgCommand ArgRole = "command" // this operand and every later one are a command (argv) the program runs
)

// argRoles lists the roles ReadPrograms accepts, for error messages.
var argRoles = []ArgRole{ArgRead, ArgWrite, ArgPath, ArgExecute, ArgText, ArgPattern, ArgCode, ArgURL, ArgRemote, ArgShell, ArgCommand}

// pathRole is the wire role of a path found as a word of role r.
func (r ArgRole) pathRole() wire.Role {
	switch r {
	case ArgRead:
		return wire.RoleRead
	case ArgWrite:
		return wire.RoleWrite
	case ArgExecute:
		return wire.RoleExecute
	}
	return wire.RoleUnknown
}

// isPath reports whether a word of role r is a path whatever its shape.
func (r ArgRole) isPath() bool {
	return r == ArgRead || r == ArgWrite || r == ArgPath || r == ArgExecute
}

// ProgramSpec is the spec of one program, or of one of its subcommands.
// The zero value knows nothing: every option is a flag without a value and
// every operand is judged by its shape.
type ProgramSpec struct {
	// Options by name as typed: "-o", "--output", and single-dash long
	// names ("-name" of find, "-run" of go test). An option that is not
	// listed takes no value.
	Options map[string]*OptionSpec
	// Abbreviations: a long option may be given by any prefix that only
	// one listed long option has (GNU getopt_long: sort --out=f is
	// --output). The flag is then recorded under its full name.
	Abbreviations bool
	// Operands are the roles of the operands by position. One of them may
	// end in "..." (Repeat): it takes every operand the others do not, so
	// ["read...", "write"] is cp's sources and destination. Operands past
	// the list without a repeated role are judged by their shape.
	Operands []ArgRole
	// Repeat is the index in Operands of the repeated role, or -1.
	Repeat int
	// Keys give the role of the value of an operand NAME=VALUE by NAME
	// (dd of=FILE).
	Keys map[string]ArgRole
	// Subcommands by name: when the first operand is one, the words after
	// it follow that spec (its options first, then this spec's).
	Subcommands map[string]*ProgramSpec
	// OptionPrefixes are prefixes of words that are options although they
	// do not start with "-" (cargo +nightly).
	OptionPrefixes []string
	// OptionsFirst: the first operand ends the options (POSIX getopt, and
	// programs whose operands are another command's words).
	OptionsFirst bool
	// LongOnly: every option is one word, never a cluster of letters
	// (find -name, go test -run, cc -Wl,-rpath,x); a word starting with
	// a listed two-letter option that takes a value has it attached
	// (cc -I/usr/include, cmake -DX=1). Subcommands inherit it.
	LongOnly bool
	// Unlisted is the role of the value of a long option not listed
	// ("--prefix=/usr" of configure: text), "" for judging it by shape.
	Unlisted ArgRole
	// name is the spec's full name ("git commit"), parent the spec it is a
	// subcommand of.
	name   string
	parent *ProgramSpec
}

// OptionSpec is one option of a ProgramSpec.
type OptionSpec struct {
	// Values are the roles of the words the option takes, in order; none
	// for a flag. The first may be attached (-ofile, --output=file).
	Values []ArgRole
	// Optional: the value is only taken when attached (sed -i.bak,
	// --color=auto); alone, the option is a flag.
	Optional bool
	// OperandRole, when set, is the role every path operand takes while
	// the option is given (sed -i and find -delete make them written).
	OperandRole ArgRole
	// Fills: the option gives what the first operand would (grep -e PAT,
	// awk -f FILE): the operands then start at the spec's second role.
	Fills bool
}

// Programs is a set of program specs by program name. It is immutable
// once built and safe for concurrent use. The nil *Programs knows no
// program.
type Programs struct {
	specs map[string]*ProgramSpec
}

// Lookup returns the spec of a program by its basename, with any version
// suffix removed when the exact name is not known ("python3.12" is
// "python"), or nil.
func (ps *Programs) Lookup(name string) *ProgramSpec {
	if ps == nil || name == "" {
		return nil
	}
	if s, ok := ps.specs[name]; ok {
		return s
	}
	if base := strings.TrimRight(name, "0123456789."); base != "" && base != name {
		return ps.specs[base]
	}
	return nil
}

// Names returns the programs the set knows, sorted.
func (ps *Programs) Names() []string {
	if ps == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(ps.specs))
}

// With returns a set with the specs of ps, each program of over replacing
// its spec in ps. Neither set changes.
func (ps *Programs) With(over *Programs) *Programs {
	out := &Programs{specs: map[string]*ProgramSpec{}}
	if ps != nil {
		maps.Copy(out.specs, ps.specs)
	}
	if over != nil {
		maps.Copy(out.specs, over.specs)
	}
	return out
}

// defaultPrograms is the default bundle's specs, read once.
var defaultPrograms = sync.OnceValues(func() (*Programs, error) {
	raw, err := policies.FS.ReadFile(policies.ProgramsFile)
	if err != nil {
		return nil, err
	}
	return ReadPrograms(raw, policies.ProgramsFile)
})

// DefaultPrograms returns the specs of the default bundle. It fails only
// when the embedded file is broken, which its tests rule out.
func DefaultPrograms() (*Programs, error) { return defaultPrograms() }

// ReadPrograms reads program specs from JSON (docs/policy.md, "Program
// specs"): an object of programs, each an object with the optional keys
// options, abbreviations, operands, keys, subcommands, option_prefixes,
// options_first, long_only and unlisted. A program may be a string naming
// another program of the same document, whose spec it shares ("podman":
// "docker"); a subcommand may be a string naming another subcommand of
// the same program ("i": "install"). Anything else — an unknown key or role, a wrong type,
// two repeated operands, a subcommand alias to nothing — is a
// bundle_invalid error naming source, the program and the key. Empty or
// null raw is an empty set.
func ReadPrograms(raw json.RawMessage, source string) (*Programs, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return &Programs{specs: map[string]*ProgramSpec{}}, nil
	}
	v, err := ast.ValueFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, specError(source, "", "the programs are not JSON: %v", err)
	}
	return readProgramsValue(v, source)
}

// readProgramsValue is ReadPrograms for a value as the policy's store holds
// it: reading the AST the bundle loader made costs no JSON decoding.
func readProgramsValue(v ast.Value, source string) (*Programs, error) {
	ps := &Programs{specs: map[string]*ProgramSpec{}}
	if _, null := v.(ast.Null); null || v == nil {
		return ps, nil
	}
	progs, ok := v.(ast.Object)
	if !ok {
		return nil, specError(source, "", "the programs must be an object of program specs, not %s", ast.ValueName(v))
	}
	specs, err := readSpecs(progs, source, func(name string) (string, *ProgramSpec) { return name, nil },
		func(alias, target string) error {
			return specError(source, alias, "%q is no program spec of %s", target, source)
		})
	if err != nil {
		return nil, err
	}
	ps.specs = specs
	return ps, nil
}

// sortedKeys returns the keys of obj that are strings, sorted.
func sortedKeys(obj ast.Object) []string {
	keys := make([]string, 0, obj.Len())
	for _, k := range obj.Keys() {
		if s, ok := k.Value.(ast.String); ok {
			keys = append(keys, string(s))
		}
	}
	slices.Sort(keys)
	return keys
}

// specKeys are the keys a spec may have.
var specKeys = []string{"options", "abbreviations", "operands", "keys", "subcommands", "option_prefixes", "options_first", "long_only", "unlisted"}

// readSpec reads the spec of name (a program, or "git commit").
func readSpec(v ast.Value, source, name string, parent *ProgramSpec) (*ProgramSpec, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return nil, specError(source, name, "a spec must be an object, not %s", ast.ValueName(v))
	}
	if obj.Len() != len(sortedKeys(obj)) {
		return nil, specError(source, name, "a spec's keys must be strings")
	}
	s := &ProgramSpec{Repeat: -1, name: name, parent: parent}
	fail := func(key, format string, args ...any) error {
		return specError(source, name, "%s: %s", key, fmt.Sprintf(format, args...))
	}
	for _, key := range sortedKeys(obj) {
		val := obj.Get(ast.StringTerm(key)).Value
		var err error
		switch key {
		case "abbreviations":
			s.Abbreviations, err = readBool(val)
		case "options_first":
			s.OptionsFirst, err = readBool(val)
		case "long_only":
			s.LongOnly, err = readBool(val)
		case "unlisted":
			s.Unlisted, err = readRole(val)
		case "option_prefixes":
			s.OptionPrefixes, err = readStrings(val)
		case "operands":
			var list []string
			if list, err = readStrings(val); err != nil {
				break
			}
			for i, o := range list {
				r, repeat := strings.CutSuffix(o, "...")
				if !validRole(ArgRole(r)) {
					return nil, fail(fmt.Sprintf("operands[%d]", i), "%s", roleProblem(ArgRole(r)))
				}
				if repeat {
					if s.Repeat >= 0 {
						return nil, fail(fmt.Sprintf("operands[%d]", i), `only one operand role may end in "..."`)
					}
					s.Repeat = i
				}
				s.Operands = append(s.Operands, ArgRole(r))
			}
		case "keys":
			m, isObj := val.(ast.Object)
			if !isObj {
				return nil, fail(key, "want an object of roles, not %s", ast.ValueName(val))
			}
			s.Keys = make(map[string]ArgRole, m.Len())
			for _, k := range sortedKeys(m) {
				r, err := readRole(m.Get(ast.StringTerm(k)).Value)
				if err != nil {
					return nil, fail("keys."+k, "%v", err)
				}
				s.Keys[k] = r
			}
		case "options":
			err = s.readOptions(val, fail)
		case "subcommands":
			err = s.readSubcommands(val, source)
		default:
			return nil, fail(key, "unknown key (want one of %s)", strings.Join(specKeys, ", "))
		}
		if err != nil {
			var werr *wire.Error
			if errors.As(err, &werr) {
				return nil, err // a subcommand's own error names it already
			}
			return nil, fail(key, "%v", err)
		}
	}
	return s, nil
}

// readOptions reads the options object of s.
func (s *ProgramSpec) readOptions(v ast.Value, fail func(key, format string, args ...any) error) error {
	obj, ok := v.(ast.Object)
	if !ok {
		return fmt.Errorf("want an object of options, not %s", ast.ValueName(v))
	}
	s.Options = make(map[string]*OptionSpec, obj.Len())
	for _, opt := range sortedKeys(obj) {
		if len(opt) < 2 || opt[0] != '-' && !slices.ContainsFunc(s.OptionPrefixes, func(p string) bool { return strings.HasPrefix(opt, p) }) {
			return fail("options", "%q is not an option name (it must start with \"-\")", opt)
		}
		o, err := readOption(obj.Get(ast.StringTerm(opt)).Value)
		if err != nil {
			return fail("options."+opt, "%v", err)
		}
		s.Options[opt] = o
	}
	return nil
}

// readSubcommands reads the subcommands object of s: specs, and aliases
// naming one of them.
func (s *ProgramSpec) readSubcommands(v ast.Value, source string) error {
	obj, ok := v.(ast.Object)
	if !ok {
		return fmt.Errorf("want an object of subcommand specs, not %s", ast.ValueName(v))
	}
	subs, err := readSpecs(obj, source, func(sub string) (string, *ProgramSpec) { return s.name + " " + sub, s },
		func(alias, target string) error {
			return specError(source, s.name, "subcommands.%s: %q is no subcommand spec of %s", alias, target, s.name)
		})
	s.Subcommands = subs
	return err
}

// readSpecs reads an object of specs by name, where a string value is an
// alias naming another entry of the same object, whose spec it shares.
// naming gives an entry's full name and parent; unknown is the error of
// an alias to no entry.
func readSpecs(obj ast.Object, source string, naming func(string) (string, *ProgramSpec), unknown func(alias, target string) error) (map[string]*ProgramSpec, error) {
	specs := make(map[string]*ProgramSpec, obj.Len())
	aliases := map[string]string{}
	for _, key := range sortedKeys(obj) {
		val := obj.Get(ast.StringTerm(key)).Value
		if target, isAlias := val.(ast.String); isAlias {
			aliases[key] = string(target)
			continue
		}
		name, parent := naming(key)
		spec, err := readSpec(val, source, name, parent)
		if err != nil {
			return nil, err
		}
		specs[key] = spec
	}
	for _, alias := range slices.Sorted(maps.Keys(aliases)) {
		spec, ok := specs[aliases[alias]]
		if !ok {
			return nil, unknown(alias, aliases[alias])
		}
		specs[alias] = spec
	}
	return specs, nil
}

// readOption reads an option: a role string (one value), a list of roles
// (several values), null (a flag), or an object {value, optional,
// operands, fills}.
func readOption(v ast.Value) (*OptionSpec, error) {
	if obj, ok := v.(ast.Object); ok {
		o := &OptionSpec{}
		for _, key := range sortedKeys(obj) {
			val := obj.Get(ast.StringTerm(key)).Value
			var err error
			switch key {
			case "value":
				var inner *OptionSpec
				if _, nested := val.(ast.Object); nested {
					return nil, fmt.Errorf("value: want a role, a list of roles or null")
				}
				inner, err = readOption(val)
				if err == nil {
					o.Values = inner.Values
				}
			case "optional":
				o.Optional, err = readBool(val)
			case "fills":
				o.Fills, err = readBool(val)
			case "operands":
				o.OperandRole, err = readRole(val)
			default:
				return nil, fmt.Errorf("unknown key %q (want value, optional, operands or fills)", key)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %v", key, err)
			}
		}
		if obj.Len() != len(sortedKeys(obj)) {
			return nil, fmt.Errorf("an option's keys must be strings")
		}
		if o.Optional && len(o.Values) != 1 {
			return nil, fmt.Errorf("an optional value needs exactly one value role")
		}
		if o.Fills && len(o.Values) == 0 {
			return nil, fmt.Errorf("an option that fills an operand takes a value")
		}
		return o, nil
	}
	var roles []ArgRole
	switch x := v.(type) {
	case ast.Null:
	case ast.String:
		roles = []ArgRole{ArgRole(x)}
	case *ast.Array:
		list, err := readStrings(x)
		if err != nil {
			return nil, err
		}
		for _, r := range list {
			roles = append(roles, ArgRole(r))
		}
	default:
		return nil, fmt.Errorf("want a role, a list of roles, null or an object, not %s", ast.ValueName(v))
	}
	for _, r := range roles {
		if !validRole(r) || r == ArgCommand {
			return nil, fmt.Errorf("%s", roleProblem(r))
		}
	}
	return &OptionSpec{Values: roles}, nil
}

// readBool reads a boolean.
func readBool(v ast.Value) (bool, error) {
	b, ok := v.(ast.Boolean)
	if !ok {
		return false, fmt.Errorf("want true or false, not %s", ast.ValueName(v))
	}
	return bool(b), nil
}

// readRole reads a role name.
func readRole(v ast.Value) (ArgRole, error) {
	s, ok := v.(ast.String)
	if !ok {
		return "", fmt.Errorf("want a role, not %s", ast.ValueName(v))
	}
	if !validRole(ArgRole(s)) {
		return "", fmt.Errorf("%s", roleProblem(ArgRole(s)))
	}
	return ArgRole(s), nil
}

// readStrings reads a list of strings.
func readStrings(v ast.Value) ([]string, error) {
	arr, ok := v.(*ast.Array)
	if !ok {
		return nil, fmt.Errorf("want a list of strings, not %s", ast.ValueName(v))
	}
	out := make([]string, 0, arr.Len())
	for i := range arr.Len() {
		s, ok := arr.Elem(i).Value.(ast.String)
		if !ok {
			return nil, fmt.Errorf("element %d: want a string, not %s", i, ast.ValueName(arr.Elem(i).Value))
		}
		out = append(out, string(s))
	}
	return out, nil
}

func validRole(r ArgRole) bool { return slices.Contains(argRoles, r) }

func roleProblem(r ArgRole) string {
	names := make([]string, len(argRoles))
	for i, a := range argRoles {
		names[i] = string(a)
	}
	return fmt.Sprintf("unknown role %q (want one of %s)", r, strings.Join(names, ", "))
}

// specError is the bundle_invalid error of a broken spec.
func specError(source, program, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	where := "program specs"
	if program != "" {
		where = "the spec of " + program
	}
	e := wire.Errorf(wire.CodeBundleInvalid, "%s in %s: %s", where, source, msg).With("file", source)
	if program != "" {
		e = e.With("program", program)
	}
	return e
}

// option finds the option a word names in s or a spec it is a subcommand
// of, innermost first: the exact name, then (for specs with
// Abbreviations) the only long option the word is a prefix of. It returns
// the option's full name.
func (s *ProgramSpec) option(name string) (string, *OptionSpec) {
	for sp := s; sp != nil; sp = sp.parent {
		if o, ok := sp.Options[name]; ok {
			return name, o
		}
	}
	if !strings.HasPrefix(name, "--") || len(name) < 3 || !s.abbreviations() {
		return "", nil
	}
	found := ""
	var option *OptionSpec
	for sp := s; sp != nil; sp = sp.parent {
		for full, o := range sp.Options {
			if !strings.HasPrefix(full, name) || full == found {
				continue
			}
			if found != "" {
				return "", nil // ambiguous: getopt_long refuses it
			}
			found, option = full, o
		}
	}
	return found, option
}

// abbreviations reports whether s or a spec it is a subcommand of allows
// abbreviations.
func (s *ProgramSpec) abbreviations() bool {
	for sp := s; sp != nil; sp = sp.parent {
		if sp.Abbreviations {
			return true
		}
	}
	return false
}

// longOnly reports whether s or a spec it is a subcommand of is LongOnly.
func (s *ProgramSpec) longOnly() bool {
	for sp := s; sp != nil; sp = sp.parent {
		if sp.LongOnly {
			return true
		}
	}
	return false
}

// unlisted is the role of the value of an unlisted long option.
func (s *ProgramSpec) unlisted() ArgRole {
	for sp := s; sp != nil; sp = sp.parent {
		if sp.Unlisted != "" {
			return sp.Unlisted
		}
	}
	return ""
}

// isOptionWord reports whether a word that does not start with "-" is an
// option by one of the spec's prefixes.
func (s *ProgramSpec) isOptionWord(t string) bool {
	for sp := s; sp != nil; sp = sp.parent {
		for _, p := range sp.OptionPrefixes {
			if strings.HasPrefix(t, p) && len(t) > len(p) {
				return true
			}
		}
	}
	return false
}

// operandRoles returns the role of each of n operands: the fixed roles
// before the repeated one from the front, those after it from the end,
// the repeated one for the rest; skip leading roles are filled by options
// (grep -e). Operands past a list without a repeated role have no role.
func (s *ProgramSpec) operandRoles(n, skip int) []ArgRole {
	out := make([]ArgRole, n)
	roles := s.Operands
	rep := s.Repeat
	if skip > 0 {
		if skip >= len(roles) {
			if rep >= 0 {
				roles, rep = roles[rep:rep+1], 0
			} else {
				roles = nil
			}
		} else if rep >= 0 && skip > rep {
			roles, rep = roles[rep:], 0
		} else {
			roles = roles[skip:]
			if rep >= 0 {
				rep -= skip
			}
		}
	}
	if rep < 0 {
		copy(out, roles)
		return out
	}
	before, after := roles[:rep], roles[rep+1:]
	i := 0
	for ; i < len(before) && i < n; i++ {
		out[i] = before[i]
	}
	tail := min(len(after), n-i)
	for k := 0; k < tail; k++ {
		out[n-tail+k] = after[len(after)-tail+k]
	}
	for ; i < n-tail; i++ {
		out[i] = roles[rep]
	}
	return out
}
