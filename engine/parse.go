package engine

import (
	"cmp"
	"context"
	"os"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/shlex"

	"avfs/wire"
)

// ParseRequest is what engine.Parse needs.
type ParseRequest struct {
	Argv    []string // the command words (after `--`); exactly one of Argv or Shell
	Shell   string   // a shell script given with --shell "…"
	Cwd     string   // vault-absolute working dir, "" means "/"
	Env     []string // names of env vars the command will see (values never)
	PathEnv string   // PATH used to resolve program_path ("" = os PATH)
	Vault   wire.VaultInput
	Request wire.RequestInput
	// Sandbox is how the command will be held, copied to input.sandbox;
	// it decides what absolute paths and ~ name (see view). An empty
	// Mode is none: with an empty Workspace too (the zero value), every
	// absolute path is the host's and ~ the host's home, as for a caller
	// that knows nothing of sandboxes.
	Sandbox wire.SandboxInput
	// Programs are the program specs the words are classified by
	// (Policy.Programs gives the loaded bundles'); nil is
	// DefaultPrograms.
	Programs *Programs
	// Workspace answers what the input says about the vault's files
	// (wire.Command.LocalBin); nil asks nothing and leaves those fields
	// empty.
	Workspace Workspace
}

// Origins of a command (wire.Command.Origin).
const (
	originArgv         = "argv"
	originScript       = "script"
	originSubstitution = "substitution"
	originEval         = "eval"
	originXargs        = "xargs"
	originFind         = "find"
	originGitConfig    = "git_config"
	originArgument     = "argument"
)

// Sources of a path (wire.Path.Source).
const (
	sourceArg      = "arg"
	sourceRedirect = "redirect"
	sourceProgram  = "program"
)

// Limits that keep a hostile command from making parsing slow or deep.
const (
	// maxInputBytes caps the argv words together.
	maxInputBytes = 1 << 20
	// maxWordBytes caps one argv word and one script: Linux cannot exec
	// a longer argument (MAX_ARG_STRLEN), so nothing longer could run.
	maxWordBytes = 128 << 10
	// maxNesting caps how deep brackets nest in a script, and maxOpRun
	// how many unary operators follow each other: the bash parser
	// recurses on both, and a deep enough input would exhaust the stack.
	maxNesting = 256
	maxOpRun   = 1024
	// maxScriptDepth caps scripts inside scripts (sh -c in sh -c, eval in
	// eval). Deeper nesting is recorded as a parse error.
	maxScriptDepth = 8
	// maxWrappers caps how many wrappers are peeled off one command.
	maxWrappers = 64
)

// Parse reads one command — an argv or a shell script — into the policy
// input document (docs/input.md). It fails only on unusable input, with a
// *wire.Error of code invalid_input: no command, both or neither of Argv
// and Shell, invalid UTF-8, a NUL byte, a word or script over 128 KiB, an
// argv over 1 MiB, a sandbox mode other than "", namespaces and none. A
// script that does not parse is not an error: Script.ParseError records
// why and the policy decides. Parse runs nothing; it only looks programs
// up on PATH and asks req.Workspace about files of the vault. It returns
// ctx's error when ctx is done. Parse is safe for concurrent use (as far
// as req.Workspace is).
func Parse(ctx context.Context, req ParseRequest) (*wire.Input, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRequest(&req); err != nil {
		return nil, err
	}
	sb := sandboxInput(req.Sandbox)
	programs := req.Programs
	if programs == nil {
		var err error
		if programs, err = DefaultPrograms(); err != nil {
			return nil, wire.Errorf(wire.CodeInternal, "parse command: %w", err)
		}
	}
	b := &inputBuilder{
		ctx:       ctx,
		view:      newView(sb),
		programs:  programs,
		workspace: req.Workspace,
		pathEnv:   req.PathEnv,
		commands:  make([]wire.Command, 0, 2),
		paths:     []wire.Path{},
	}
	if req.PathEnv == "" {
		b.pathEnv = os.Getenv("PATH")
	}
	b.static.childShellsUnknown = envRunsCode(req.Env)
	cwd := cleanCwd(req.Cwd)
	dir := dirState{kind: dirVault, path: cwd}
	if req.Shell != "" {
		b.script = newScript(req.Shell, "")
		b.parseScript(shellScope{origin: originScript, dir: &dir, pipeLen: 1}, req.Shell, "")
	} else {
		words := make([]shellWord, len(req.Argv))
		for i, a := range req.Argv {
			words[i] = shellWord{text: a, literal: true}
		}
		sc := shellScope{origin: originArgv, dir: &dir, pipeLen: 1}
		b.addCommand(&sc, words, cmdExtra{raw: quoteArgv(req.Argv)})
	}
	if b.err != nil {
		return nil, b.err
	}
	in := &wire.Input{
		SchemaVersion: wire.InputSchemaVersion,
		Commands:      b.commands,
		Script:        b.script,
		Paths:         b.paths,
		Cwd:           cwd,
		Env:           envNames(req.Env),
		Vault:         req.Vault,
		Request:       req.Request,
		Sandbox:       sb,
	}
	if len(b.commands) > 0 {
		in.Command = b.commands[0]
	} else {
		in.Command = newCommand(originScript)
	}
	return in, nil
}

// ParseLine splits one command line with google/shlex (for callers that get
// a single string) and returns Argv. Quotes and backslashes are removed, a
// shellWord starting with # begins a comment; no other shell syntax is
// understood. An unterminated quote, a trailing backslash, invalid UTF-8 or
// a line without words is an invalid_input error.
func ParseLine(line string) ([]string, error) {
	if p := textProblem(line); p != "" {
		return nil, wire.Errorf(wire.CodeInvalidInput, "parse command: the command line %s", p)
	}
	argv, err := shlex.Split(line)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "closing quote"):
			return nil, wire.Errorf(wire.CodeInvalidInput, "parse command: unterminated quote")
		case strings.Contains(msg, "escape character"):
			return nil, wire.Errorf(wire.CodeInvalidInput, "parse command: trailing backslash")
		}
		return nil, wire.Errorf(wire.CodeInvalidInput, "parse command: %s", msg)
	}
	if len(argv) == 0 {
		return nil, wire.Errorf(wire.CodeInvalidInput, "parse command: empty command")
	}
	return argv, nil
}

// checkRequest rejects requests Parse cannot read.
func checkRequest(req *ParseRequest) error {
	switch {
	case len(req.Argv) > 0 && req.Shell != "":
		return wire.Errorf(wire.CodeInvalidInput, "parse command: give either argv or a shell script, not both")
	case len(req.Argv) == 0 && req.Shell == "":
		return wire.Errorf(wire.CodeInvalidInput, "parse command: empty command: give argv or a shell script")
	case req.Shell != "":
		if strings.TrimSpace(req.Shell) == "" {
			return wire.Errorf(wire.CodeInvalidInput, "parse command: empty command: the shell script is blank")
		}
		if p := textProblem(req.Shell); p != "" {
			return wire.Errorf(wire.CodeInvalidInput, "parse command: the shell script %s", p)
		}
		if len(req.Shell) > maxWordBytes {
			return wire.Errorf(wire.CodeInvalidInput, "parse command: the shell script is longer than %d bytes", maxWordBytes)
		}
	default:
		if req.Argv[0] == "" {
			return wire.Errorf(wire.CodeInvalidInput, "parse command: empty command: the program name is empty")
		}
		n := 0
		for i, a := range req.Argv {
			if p := textProblem(a); p != "" {
				return wire.Errorf(wire.CodeInvalidInput, "parse command: argument %d %s", i, p)
			}
			if len(a) > maxWordBytes {
				return wire.Errorf(wire.CodeInvalidInput, "parse command: argument %d is longer than %d bytes", i, maxWordBytes)
			}
			n += len(a) + 1
		}
		if n > maxInputBytes {
			return wire.Errorf(wire.CodeInvalidInput, "parse command: the command is longer than %d bytes", maxInputBytes)
		}
	}
	if !utf8.ValidString(req.Cwd) {
		return wire.Errorf(wire.CodeInvalidInput, "parse command: the working directory is not valid UTF-8")
	}
	if m := req.Sandbox.Mode; m != "" && !m.Valid() {
		return wire.Errorf(wire.CodeInvalidInput, "parse command: unknown sandbox mode %q (want namespaces or none)", m)
	}
	return nil
}

// sandboxInput is input.sandbox for s: an empty mode is none, and the
// lists are copies, never nil.
func sandboxInput(s wire.SandboxInput) wire.SandboxInput {
	s.Mode = cmp.Or(s.Mode, wire.SandboxNone)
	s.ReadOnlySystem = append([]string{}, s.ReadOnlySystem...)
	s.Scratch = append([]string{}, s.Scratch...)
	return s
}

// textProblem says why no program could receive s, or "" when it can:
// invalid UTF-8 (a policy could not match it reliably) or a NUL byte (exec
// cannot pass one).
func textProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "contains a NUL byte"
	}
	return ""
}

// cleanCwd makes the request's working directory vault-absolute and clean.
func cleanCwd(cwd string) string {
	if cwd == "" {
		return "/"
	}
	return path.Clean("/" + cwd)
}

// envNames returns the sorted, de-duplicated variable names, dropping any
// "=value" a caller passed by mistake so values never reach the policy.
func envNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, e := range env {
		if i := strings.IndexByte(e, '='); i >= 0 {
			e = e[:i]
		}
		if e != "" {
			names = append(names, e)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// newScript returns an empty Script for source run by shell.
func newScript(source, shell string) *wire.Script {
	return &wire.Script{
		Source:    source,
		Shell:     shell,
		Redirects: []wire.Redirect{},
		Functions: []string{},
	}
}

// newCommand returns a command with every slice and map non-nil, so the
// JSON document never holds null where Rego iterates.
func newCommand(origin string) wire.Command {
	return wire.Command{
		Argv:        []string{},
		Args:        []string{},
		Flags:       []string{},
		FlagValues:  map[string]string{},
		Operands:    []string{},
		Wrappers:    []wire.Wrapper{},
		Assignments: map[string]string{},
		Redirects:   []wire.Redirect{},
		Code:        []string{},
		Feeds:       -1,
		Origin:      origin,
		PipelineLen: 1,
	}
}

// QuoteArgv renders argv as one shell command line, as input commands'
// raw shows an argv: words that are not plain (letters, digits,
// @%+=:,./_-) are single-quoted.
func QuoteArgv(argv []string) string { return quoteArgv(argv) }

// quoteArgv renders argv as a shell would need it typed: words that are
// not plain are single-quoted.
func quoteArgv(argv []string) string {
	var sb strings.Builder
	for i, a := range argv {
		if i > 0 {
			sb.WriteByte(' ')
		}
		quoteWord(&sb, a)
	}
	return sb.String()
}

// quoteWord writes s to sb, single-quoted unless every byte is plain.
func quoteWord(sb *strings.Builder, s string) {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("@%+=:,./_-", c) >= 0
	}
	if plain {
		sb.WriteString(s)
		return
	}
	sb.WriteByte('\'')
	sb.WriteString(strings.ReplaceAll(s, "'", `'\''`))
	sb.WriteByte('\'')
}
