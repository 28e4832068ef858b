package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"avfs/hooks"
	"avfs/manage"
	"avfs/wire"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// env is what every command needs from the process: streams, global flags and the state directory.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	json   bool   // --json
	vault  string // --vault, "" when not given
	// pathB64 is --path-b64: vault path arguments are base64 (vaultPaths).
	pathB64 bool
	home    string // AVFS_HOME or ~/.avfs
	akey    []byte // the audit key, once loaded (auditKey)
	// printed is set once a command has printed its JSON document, so that an
	// error after it does not print a second one.
	printed bool

	// managerMu guards manager and managers: the Managers of OPA's
	// plugins the command started (opa.go), stopped when it ends.
	managerMu sync.Mutex
	manager   *manage.Manager // a one-shot command's, reused
	managers  []*manage.Manager
}

// globalFlags are accepted anywhere on the command line; run hoists them in
// front of the command so that urfave/cli sees them as application flags.
var globalFlags = map[string]bool{"vault": true, "json": false, "path-b64": false} // name -> takes a value

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	app := newApp(e)
	if n := len(args); n > 1 && args[n-1] == "--generate-bash-completion" {
		if n > 2 && strings.HasPrefix(args[n-2], "-") {
			// A shell completes a flag: urfave/cli fails on the partial
			// flag, so the candidates are the flags of the command named.
			completeFlags(e.stdout, app, args[1:n-2], args[n-2])
			return wire.ExitOK
		}
		// A "--" typed earlier is no terminator here (urfave/cli panics on it).
		kept := args[:0:0]
		for _, a := range args {
			if a != "--" {
				kept = append(kept, a)
			}
		}
		args = kept
	}
	args = lsHumanFlag(normalizeArgs(app, args))
	// Global flags are read before the app runs so that an error presented
	// for a usage problem still honours --json.
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "--json" || a == "-json" || a == "--json=true" {
			e.json = true
		}
	}
	err := app.RunContext(ctx, args)
	e.stopManagers()
	if h, ok := hookHarness(args); ok && err != nil && !e.printed {
		// avfs failed before the hook could answer (no home, a flag it
		// cannot read): the harness must still get its blocking answer,
		// never an exit status it takes for "run it".
		a := hooks.Block(h, "avfs hook failed before deciding: "+err.Error()+"; the command is blocked")
		_, _ = stdout.Write(a.Stdout)
		io.WriteString(stderr, a.Stderr)
		return a.Exit
	}
	return e.present(err)
}

func newApp(e *env) *cli.App {
	app := &cli.App{
		Name:                   "avfs",
		Usage:                  "run agent commands under policy in checkpointed SQLite vaults",
		Version:                version,
		EnableBashCompletion:   true,
		UseShortOptionHandling: true,
		Reader:                 e.stdin,
		Writer:                 e.stdout,
		ErrWriter:              e.stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "vault", Usage: "vault `NAME` (default: the current vault, else \"default\")", EnvVars: []string{"AVFS_VAULT"}},
			&cli.BoolFlag{Name: "json", Usage: "print exactly one JSON document on stdout"},
			&cli.BoolFlag{Name: "path-b64", Usage: "vault PATH arguments (ln's TARGET too) are the standard base64 of their bytes, as path_b64 in --json output gives them: for names that are not UTF-8"},
		},
		Before: func(c *cli.Context) error {
			// --json after an unknown command is not parsed as a flag, but
			// run saw it: keep it so the usage error is a JSON document.
			e.json = e.json || c.Bool("json")
			e.vault = c.String("vault")
			e.pathB64 = c.Bool("path-b64")
			home, err := stateDir()
			if err != nil {
				return err
			}
			e.home = home
			return nil
		},
		ExitErrHandler: func(*cli.Context, error) {}, // errors are presented by run
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return wire.Errorf(wire.CodeUsage, "%s", err)
		},
		Commands: commands(e),
	}
	setUsageErrors(app.Commands)
	return app
}

// completeFlags prints the flags of the command that words name (the
// application's own flags when they name none) that begin with prefix.
func completeFlags(w io.Writer, app *cli.App, words []string, prefix string) {
	flags := app.Flags
	cmds := app.Commands
	for _, word := range words {
		if strings.HasPrefix(word, "-") {
			continue
		}
		c := findCommand(cmds, word)
		if c == nil {
			break
		}
		flags, cmds = append(c.Flags, app.Flags...), c.Subcommands
	}
	for _, f := range flags {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		for _, name := range f.Names() {
			dashed := "--" + name
			if len(name) == 1 {
				dashed = "-" + name
			}
			if strings.HasPrefix(dashed, prefix) {
				fmt.Fprintln(w, dashed)
			}
		}
	}
}

// setUsageErrors makes flag errors of every command usage errors (exit 2).
func setUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.UseShortOptionHandling = true // ls -la is ls -l -a
		if len(c.Subcommands) == 0 {
			// urfave/cli gives every command a "help" subcommand (alias
			// "h"), so `avfs vault create h` or `avfs cat help` printed help
			// and exited 0: for a command without subcommands those words
			// are arguments (--help still shows its help).
			c.HideHelpCommand = true
		}
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return wire.Errorf(wire.CodeUsage, "%s", err)
		}
		if c.Action == nil && len(c.Subcommands) > 0 {
			c.Action = func(ctx *cli.Context) error {
				if ctx.Args().Len() > 0 {
					return wire.Errorf(wire.CodeUsage, "unknown command %q for %q", ctx.Args().First(), ctx.Command.FullName())
				}
				if !ctx.Bool("json") { // with --json the error is the only output
					_ = cli.ShowSubcommandHelp(ctx)
				}
				return wire.Errorf(wire.CodeUsage, "%s needs a subcommand", ctx.Command.FullName())
			}
		}
		setUsageErrors(c.Subcommands)
	}
}

// stateDir returns AVFS_HOME, else ~/.avfs.
func stateDir() (string, error) {
	if h := os.Getenv("AVFS_HOME"); h != "" {
		return filepath.Abs(h)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", wire.Errorf(wire.CodeInvalidInput, "no state directory: set AVFS_HOME (%v)", err)
	}
	return filepath.Join(home, ".avfs"), nil
}

// present prints err (if any) the way the user asked and returns the exit status.
func (e *env) present(err error) int {
	if err == nil {
		return wire.ExitOK
	}
	var exit *exitStatus
	if errors.As(err, &exit) {
		return exit.code
	}
	err = classify(err)
	if e.json && !e.printed {
		_ = writeJSON(e.stdout, wire.ErrorDocument{Error: wire.ErrorObject(err)})
	} else {
		// People, or a failure after the one JSON document was printed.
		fmt.Fprintf(e.stderr, "avfs: %s\n", err)
	}
	return wire.ExitCode(wire.CodeOf(err))
}

// exitStatus ends a command with a given status after it has printed its own result.
type exitStatus struct{ code int }

func (x *exitStatus) Error() string { return fmt.Sprintf("exit status %d", x.code) }

// classify turns urfave/cli's own errors (unknown command, missing flag
// values) into usage errors.
func classify(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return err
	}
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined", "flag needs an argument", "invalid value", "No help topic", "Required flag", "invalid boolean"} {
		if strings.Contains(msg, p) {
			return wire.Errorf(wire.CodeUsage, "%s", msg)
		}
	}
	return err
}

// usageError is a shortcut for a usage error.
func usageError(format string, args ...any) error {
	return wire.Errorf(wire.CodeUsage, format, args...)
}
