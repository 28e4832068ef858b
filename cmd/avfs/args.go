package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// normalizeArgs lets people put flags where they type them. urfave/cli stops
// reading flags at the first positional argument, so this rewrites args:
// global flags (--vault, --json) move in front of the command, and the flags
// of the command that will run move in front of its positional arguments.
// Nothing after "--" is touched.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	var globals, path, flags, positional, rest []string
	cmds := app.Commands
	var leaf *cli.Command
	inCommand := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = args[i:]
			break
		}
		if name, inline, ok := flagName(a); ok {
			if takesValue, global := globalFlags[name]; global {
				globals = append(globals, a)
				if takesValue && !inline && i+1 < len(args) {
					i++
					globals = append(globals, args[i])
				}
				continue
			}
			if !inCommand {
				globals = append(globals, a) // app flags such as --help, --version
				continue
			}
			flags = append(flags, a)
			if !inline && leaf != nil && flagTakesValue(leaf, name) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
			continue
		}
		// A positional word: a (sub)command name while we are still walking
		// the command tree and no positional has been seen.
		if len(positional) == 0 {
			if c := findCommand(cmds, a); c != nil {
				path = append(path, a)
				leaf, cmds, inCommand = c, c.Subcommands, true
				continue
			}
		}
		if !inCommand {
			// Unknown command: leave the rest as it is for urfave/cli to report.
			rest = args[i:]
			break
		}
		positional = append(positional, a)
	}
	out := []string{args[0]}
	out = append(out, globals...)
	out = append(out, path...)
	out = append(out, flags...)
	out = append(out, positional...)
	return append(out, rest...)
}

// flagName returns the name of a flag argument ("--vault=x" gives "vault", true).
func flagName(a string) (name string, inline, ok bool) {
	if len(a) < 2 || a[0] != '-' || a == "-" {
		return "", false, false
	}
	name = strings.TrimLeft(a, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i], true, true
	}
	return name, false, true
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// flagTakesValue reports whether the command's flag called name needs a value.
func flagTakesValue(c *cli.Command, name string) bool {
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if df, ok := f.(cli.DocGenerationFlag); ok {
				return df.TakesValue()
			}
			return true
		}
	}
	return false
}

// lsHumanFlag rewrites the -h of `avfs ls` (alone or combined, as in -lah)
// into --human-readable: urfave/cli reads any -h as a request for help.
// args are normalized: global flags, then the command, then its flags.
func lsHumanFlag(args []string) []string {
	i := 1
	for i < len(args) {
		name, inline, ok := flagName(args[i])
		if !ok {
			break
		}
		if takesValue := globalFlags[name]; takesValue && !inline {
			i++
		}
		i++
	}
	if i >= len(args) || args[i] != "ls" {
		return args
	}
	out := append([]string{}, args[:i+1]...)
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		if a == "--" {
			return append(out, args[j:]...)
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && !strings.Contains(a, "=") && strings.Contains(a, "h") {
			if rest := strings.ReplaceAll(a[1:], "h", ""); rest != "" {
				out = append(out, "-"+rest)
			}
			out = append(out, "--human-readable")
			continue
		}
		out = append(out, a)
	}
	return out
}

// setKeyValues reads the KEY VALUE pairs given as arguments to a settings
// command (`quota set max_files 10`, `retention set max_age 7d`) as the
// flags they name, the underscores as dashes, so that both forms go
// through the flags' own parsing. keys are the accepted keys, with
// underscores; what names the command in errors, which are usage errors.
func setKeyValues(c *cli.Context, what string, keys []string) error {
	pairs := c.Args().Slice()
	if len(pairs)%2 != 0 {
		return usageError("%s: KEY VALUE pairs expected, got %q", what, pairs)
	}
	for i := 0; i < len(pairs); i += 2 {
		if !slices.Contains(keys, strings.ReplaceAll(pairs[i], "-", "_")) {
			return usageError("%s: unknown setting %q (%s)", what, pairs[i], strings.Join(keys, ", "))
		}
		if err := c.Set(strings.ReplaceAll(pairs[i], "_", "-"), pairs[i+1]); err != nil {
			return usageError("%s: %s: %v", what, pairs[i], err)
		}
	}
	return nil
}
