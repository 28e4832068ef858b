package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"avfs/runner"
	"avfs/vault"
	"avfs/wire"
)

// vaultMergeCommand is `avfs vault merge`.
func vaultMergeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "merge",
		Usage: "merge a fork back into its parent: what only the fork changed applies, in one transaction",
		UsageText: "avfs vault merge FORK [--into PARENT] [--dry-run] [--ours | --theirs] [--take-ours PATH]... [--take-theirs PATH]...\n\n" +
			"A three-way merge at file level: the base is the parent's state when FORK was made (the parent\n" +
			"keeps it while the fork lives), ours is the parent's state now, theirs the fork's. A path only\n" +
			"the fork changed takes the fork's entry (content, mode, link target; a rename is a deletion and an\n" +
			"addition); one only the parent changed keeps the parent's; one both changed alike stays. One both\n" +
			"changed differently is a conflict (modify/modify, modify/delete, delete/modify, add/add, file/dir),\n" +
			"and so is a directory one side deleted while the other changed something beneath it. Unless\n" +
			"--ours, --theirs or a --take-ours/--take-theirs PATH (which covers what is beneath PATH) resolves\n" +
			"every conflict, nothing is applied and the merge fails with merge_conflict, listing them.\n" +
			"The change set is applied to the parent in one transaction, with history versions and audit rows\n" +
			"(op merge) and the parent's quotas, once the effects policy allows the change set (effects_denied\n" +
			"otherwise); the fork is read, never changed, and stays. Refused\n" +
			"(vault_busy) while the fork or the parent is in a run or mounted for writing by another process.\n" +
			"--dry-run prints what would change and the conflicts, and changes nothing.\n\n" +
			"example: avfs vault merge attempt-2 --dry-run\n" +
			"example: avfs vault merge attempt-2 --take-theirs /src",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "into", DefaultText: "the fork's parent", Usage: "the vault to merge into, `PARENT` (it must be the fork's parent)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would change and what conflicts; change nothing"},
			&cli.BoolFlag{Name: "ours", Usage: "resolve every conflict by keeping the parent's state"},
			&cli.BoolFlag{Name: "theirs", Usage: "resolve every conflict by taking the fork's state"},
			&cli.StringSliceFlag{Name: "take-ours", Usage: "resolve the conflicts at and beneath `PATH` by keeping the parent's state (repeatable)"},
			&cli.StringSliceFlag{Name: "take-theirs", Usage: "resolve the conflicts at and beneath `PATH` by taking the fork's state (repeatable)"},
		},
		Action: func(c *cli.Context) error {
			opts, err := mergeFlags(c)
			if err != nil {
				return err
			}
			s, err := e.store()
			if err != nil {
				return err
			}
			cfg, err := loadConfig(e.home)
			if err != nil {
				return err
			}
			if !opts.DryRun && !cfg.Policy.SkipEffects {
				// The change set goes through the effects policy, in the
				// merge's transaction, before anything is applied.
				p, _, err := e.loadPolicy(c)
				if err != nil {
					return err
				}
				opts.Approve = func(ctx context.Context, changes []vault.Change) error {
					return runner.ApproveMerge(ctx, p, opts.Fork, changes)
				}
			}
			res, err := runMerge(c.Context, s, opts)
			if err != nil {
				return err
			}
			return e.emit(res, func(w io.Writer) error { return outputErr(writeMerge(w, res)) })
		},
	}
}

// mergeOptions is what avfs vault merge merges, and how.
type mergeOptions struct {
	Fork string
	vault.MergeOptions
}

// mergeFlags reads the command line of avfs vault merge.
func mergeFlags(c *cli.Context) (mergeOptions, error) {
	a, err := args(c, 1, 1, "FORK")
	if err != nil {
		return mergeOptions{}, err
	}
	opts := mergeOptions{Fork: a[0], MergeOptions: vault.MergeOptions{Into: c.String("into"), DryRun: c.Bool("dry-run")}}
	switch {
	case c.Bool("ours") && c.Bool("theirs"):
		return opts, usageError("vault merge: --ours and --theirs exclude each other")
	case c.Bool("ours"):
		opts.Resolve = wire.MergeOurs
	case c.Bool("theirs"):
		opts.Resolve = wire.MergeTheirs
	}
	opts.Take = map[string]wire.MergeSide{}
	for _, f := range []struct {
		flag string
		side wire.MergeSide
	}{{"take-ours", wire.MergeOurs}, {"take-theirs", wire.MergeTheirs}} {
		for _, p := range c.StringSlice(f.flag) {
			cp, err := vault.CleanPath(p)
			if err != nil {
				return opts, err
			}
			if side, ok := opts.Take[cp]; ok && side != f.side {
				return opts, usageError("vault merge: %s is given to both --take-ours and --take-theirs", cp)
			}
			opts.Take[cp] = f.side
		}
	}
	return opts, nil
}

// runMerge merges as opts says.
func runMerge(ctx context.Context, s *vault.Store, opts mergeOptions) (wire.MergeResult, error) {
	return s.Merge(ctx, opts.Fork, opts.MergeOptions)
}

// writeMerge prints a merge's result: one line per change (A, M or D and
// the path), the conflicts with their resolutions, and a summary.
func writeMerge(w io.Writer, res wire.MergeResult) error {
	if err := writeChangeLines(w, res.Changes); err != nil {
		return err
	}
	for _, c := range res.Conflicts {
		if _, err := fmt.Fprintf(w, "conflict %s %s (parent %s, fork %s): %s\n", c.Kind, shownPath(c.Path), c.Ours, c.Theirs, c.Resolution); err != nil {
			return err
		}
	}
	verb := "merged"
	switch {
	case res.DryRun:
		verb = "would merge"
	case !res.Applied:
		verb = "nothing to merge from"
	}
	_, err := fmt.Fprintf(w, "%s %s into %s: %d added, %d modified, %d deleted; %d conflicts (%d unresolved)\n",
		verb, res.Fork, res.Into, res.Stat.Added, res.Stat.Modified, res.Stat.Deleted, len(res.Conflicts), res.Unresolved)
	return err
}

// writeChangeLines prints changes as "A path", "M path" or "D path".
func writeChangeLines(w io.Writer, cs []wire.Change) error {
	for _, c := range cs {
		letter := "M"
		switch c.Op {
		case "added":
			letter = "A"
		case "deleted":
			letter = "D"
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", letter, shownPath(c.Path)); err != nil {
			return err
		}
	}
	return nil
}

// vaultDiffCommand is `avfs vault diff`.
func vaultDiffCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "list the paths whose entries differ between the current states of two vaults",
		UsageText: "avfs vault diff A B [--exit-code]\n\n" +
			"What turns vault A's tree into vault B's, one line per path: A (only in B), D (only in A) or M\n" +
			"(other content, by hash, mode, owner or link target; times are not compared). Any two vaults\n" +
			"compare, a fork and its parent or not. Both are read, never changed. For the lines of a file's\n" +
			"content, avfs diff compares versions and checkpoints of one vault.\n\n" +
			"example: avfs vault diff work attempt-2",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "exit-code", Usage: "exit 1 when anything differs"},
		},
		Action: func(c *cli.Context) error {
			a, err := args(c, 2, 2, "A B")
			if err != nil {
				return err
			}
			s, err := e.store()
			if err != nil {
				return err
			}
			res, err := runVaultDiff(c.Context, s, a[0], a[1])
			if err != nil {
				return err
			}
			err = e.emit(res, func(w io.Writer) error {
				if err := writeChangeLines(w, res.Changes); err != nil {
					return outputErr(err)
				}
				_, err := fmt.Fprintf(w, "%d added, %d modified, %d deleted\n", res.Stat.Added, res.Stat.Modified, res.Stat.Deleted)
				return outputErr(err)
			})
			if err != nil {
				return err
			}
			if c.Bool("exit-code") && len(res.Changes) > 0 {
				return &exitStatus{code: 1}
			}
			return nil
		},
	}
}

// runVaultDiff compares vaults a and b.
func runVaultDiff(ctx context.Context, s *vault.Store, a, b string) (wire.VaultDiff, error) {
	return s.DiffVaults(ctx, a, b)
}

// shownPath is p as a line shows it: quoted (Go syntax) when it is not
// UTF-8 or holds a control character, so that a name cannot forge lines.
func shownPath(p string) string {
	if utf8.ValidString(p) && !strings.ContainsFunc(p, unicode.IsControl) {
		return p
	}
	return strconv.Quote(p)
}
