package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// checkResult is the JSON document of a passing `avfs vault check`.
type checkResult struct {
	Vault string `json:"vault"`
	vault.CheckReport
}

func vaultCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "vault",
		Usage:     "create, list, select, fork, check, replicate, restore and delete vaults",
		UsageText: "avfs vault COMMAND [options]\n\nexample: avfs vault create work --use",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a new empty vault",
				UsageText: "avfs vault create NAME [--use]\n\nexample: avfs vault create work --use",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "use", Usage: "make it the current vault"}},
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 1, "NAME")
					if err != nil {
						return err
					}
					s, err := e.store()
					if err != nil {
						return err
					}
					v, err := s.Create(c.Context, a[0])
					if err != nil {
						return err
					}
					info, err := v.Info(c.Context)
					v.Close()
					if err != nil {
						return err
					}
					if c.Bool("use") {
						if err := s.Use(c.Context, a[0]); err != nil {
							return err
						}
					}
					return e.emit(info, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "created vault %s (%s)\n", info.Name, info.Path)
						return err
					})
				},
			},
			{
				Name:      "list",
				Aliases:   []string{"ls"},
				Usage:     "list the vaults",
				UsageText: "avfs vault list\n\nexample: avfs vault list --json",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					s := e.readStore()
					listed, err := s.List(c.Context)
					if err != nil {
						return err
					}
					out := wire.VaultList{Kind: wire.VaultListKind, Current: s.Current(), Vaults: make([]wire.VaultListEntry, 0, len(listed))}
					bad := []string{}
					for _, l := range listed {
						if l.Err != nil {
							out.Vaults = append(out.Vaults, wire.VaultListEntry{VaultInfo: vault.Info{Name: l.Name, Path: l.Path}, Error: wire.NewErrorBody(l.Err)})
							bad = append(bad, l.Name)
							continue
						}
						out.Vaults = append(out.Vaults, wire.VaultListEntry{VaultInfo: *l.Info})
					}
					return e.emit(out, func(w io.Writer) error {
						rows := make([]string, 0, len(out.Vaults))
						for _, i := range out.Vaults {
							parent, cur := "-", ""
							if i.Parent != nil {
								parent = i.Parent.Name
							}
							if i.Name == out.Current {
								cur = "*"
							}
							if i.Error != nil {
								rows = append(rows, fmt.Sprintf("%s\t-\t-\t-\t%s\t(unreadable: %s)", i.Name, cur, unreadableWhy(i.Error)))
								continue
							}
							rows = append(rows, fmt.Sprintf("%s\t%d\t%s\t%s\t%s", i.Name, i.Files, humanSize(i.Bytes), parent, cur))
						}
						if err := table(w, "NAME\tFILES\tSIZE\tPARENT\tCURRENT", rows); err != nil {
							return err
						}
						if len(bad) > 0 {
							fmt.Fprintf(e.stderr, "avfs: %d vault(s) cannot be read (%s): `avfs vault info NAME` says why; `avfs vault delete NAME --force` removes one\n",
								len(bad), strings.Join(bad, ", "))
						}
						return nil
					})
				},
			},
			{
				Name:      "use",
				Usage:     "make a vault the current one",
				UsageText: "avfs vault use NAME\n\nexample: avfs vault use work",
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 1, "NAME")
					if err != nil {
						return err
					}
					if err := e.readStore().Use(c.Context, a[0]); err != nil {
						return err
					}
					return e.emit(map[string]string{"current": a[0]}, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "current vault: %s\n", a[0])
						return err
					})
				},
			},
			{
				Name:      "info",
				Usage:     "describe a vault (default: the selected one)",
				UsageText: "avfs vault info [NAME]\n\nexample: avfs vault info work",
				Action: func(c *cli.Context) error {
					name, err := e.namedOrSelected(c)
					if err != nil {
						return err
					}
					return e.withNamed(c, name, func(v *vault.Vault) error {
						info, err := v.Info(c.Context)
						if err != nil {
							return err
						}
						return e.emit(info, func(w io.Writer) error { return printInfo(w, info) })
					})
				},
			},
			{
				Name:    "delete",
				Aliases: []string{"rm"},
				Usage:   "delete a vault (refused while it is mounted for writing or in a run, and while it has forks or cannot be read unless --force)",
				UsageText: "avfs vault delete NAME [--force] [--yes]\n\n" +
					"On a terminal it asks before deleting; otherwise (scripts, agents) it\n" +
					"refuses unless --yes is given.\n\nexample: avfs vault delete scratch --force --yes",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "detach its forks first; delete it even when its file cannot be read as a vault (empty, damaged, not a vault, a newer avfs's)"},
					&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "delete without asking"},
				},
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 1, "NAME")
					if err != nil {
						return err
					}
					if !c.Bool("yes") {
						if err := e.confirm(fmt.Sprintf("delete vault %s and all its history?", a[0])); err != nil {
							return err
						}
					}
					s, err := e.store()
					if err != nil {
						return err
					}
					if err := s.Delete(c.Context, a[0], c.Bool("force")); err != nil {
						return err
					}
					return e.emit(map[string]string{"deleted": a[0]}, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "deleted vault %s\n", a[0])
						return err
					})
				},
			},
			vaultMergeCommand(e),
			vaultDiffCommand(e),
			{
				Name:      "fork",
				Usage:     "make a new vault that starts as a copy of another (copy on write)",
				UsageText: "avfs vault fork SRC NAME\n\nexample: avfs vault fork work experiment",
				Action: func(c *cli.Context) error {
					a, err := args(c, 2, 2, "SRC NAME")
					if err != nil {
						return err
					}
					s, err := e.store()
					if err != nil {
						return err
					}
					info, err := s.ForkInfo(c.Context, a[0], a[1])
					if err != nil {
						return err
					}
					return e.emit(info, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "forked %s from %s\n", a[1], a[0])
						return err
					})
				},
			},
			{
				Name:      "detach",
				Usage:     "make a fork stand alone, copying the data it borrows from its parent",
				UsageText: "avfs vault detach NAME\n\nexample: avfs vault detach experiment",
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 1, "NAME")
					if err != nil {
						return err
					}
					s, err := e.store()
					if err != nil {
						return err
					}
					p := e.progress("detach", "chunks")
					defer p.finish()
					err = s.DetachWith(c.Context, a[0], vault.DetachOptions{Progress: p.report()})
					p.finish()
					if err != nil {
						return err
					}
					return e.withNamed(c, a[0], func(v *vault.Vault) error {
						info, err := v.Info(c.Context)
						if err != nil {
							return err
						}
						return e.emit(info, func(w io.Writer) error {
							_, err := fmt.Fprintf(w, "detached %s\n", a[0])
							return err
						})
					})
				},
			},
			replicateCommand(e),
			restoreCommand(e),
			{
				Name:      "check",
				Usage:     "verify a vault's integrity (exit 1 with integrity_failed when not OK)",
				UsageText: "avfs vault check [NAME]\n\nexample: avfs vault check work --json",
				Action: func(c *cli.Context) error {
					name, err := e.namedOrSelected(c)
					if err != nil {
						return err
					}
					return e.withNamed(c, name, func(v *vault.Vault) error { return runCheck(c, e, name, v) })
				},
			},
			gcCommand(e),
		},
	}
}

func runCheck(c *cli.Context, e *env, name string, v *vault.Vault) error {
	rep, err := v.Check(c.Context)
	if err != nil {
		return err
	}
	if rep.OK {
		return e.emit(checkResult{Vault: name, CheckReport: rep}, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "vault %s: ok (%d inodes, %d chunks)\n", name, rep.Inodes, rep.Chunks)
			return err
		})
	}
	if !e.json {
		for _, p := range rep.Problems {
			ref := ""
			if p.Ref != nil {
				ref = fmt.Sprintf(" [%v]", p.Ref)
			}
			fmt.Fprintf(e.stdout, "%s: %s%s\n", p.Check, p.Message, ref)
		}
	}
	we := wire.Errorf(wire.CodeIntegrity, "vault %s: check found %d problem(s)", name, len(rep.Problems))
	return we.With("vault", name).With("ok", false).With("inodes", rep.Inodes).With("chunks", rep.Chunks).With("problems", rep.Problems)
}

func gcCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "gc",
		Usage: "thin history as the vault's retention says, remove data nothing needs and compact the vault",
		UsageText: "avfs gc [--vault NAME] [--dry-run]\n\n" +
			"gc first removes the file versions the vault's retention settings let go (see avfs retention),\n" +
			"then what no checkpoint, version or fork needs, then compacts the file. Held changes and\n" +
			"preview forks whose approval expired undecided go too.\n" +
			"--dry-run says what gc would free (versions, rows, chunks, bytes, pins of forks that never\n" +
			"completed, their temporary files) and changes nothing.\n\n" +
			"example: avfs gc --vault work --dry-run",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "say what would be freed, change nothing"}},
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			name := e.vaultName()
			return e.withNamed(c, name, func(v *vault.Vault) error {
				res, err := runGC(c, v, e.progress("gc", "steps"))
				if err != nil {
					return err
				}
				if !c.Bool("dry-run") {
					// The forks of previews whose approval expired go too.
					s, err := e.store()
					if err != nil {
						return err
					}
					if _, err := s.DropExpiredPreviews(c.Context, v); err != nil {
						return err
					}
				}
				return e.emit(wire.GCResult{Vault: name, GCCounts: res}, func(w io.Writer) error {
					if res.DryRun {
						_, err := fmt.Fprintf(w, "would remove %d versions, %d rows and %d chunks (%s), release %d pins of forks that never completed and remove %d temporary files; file %s\n",
							res.Versions, res.Rows, res.Chunks, humanSize(res.BytesFreed), res.ForksReleased, res.FilesRemoved, humanSize(res.FileBefore))
						return err
					}
					_, err := fmt.Fprintf(w, "removed %d versions, %d rows and %d chunks (%s); file %s -> %s\n",
						res.Versions, res.Rows, res.Chunks, humanSize(res.BytesFreed), humanSize(res.FileBefore), humanSize(res.FileAfter))
					return err
				})
			})
		},
	}
}

// runGC runs gc, or with --dry-run its dry run, drawing p's progress.
func runGC(c *cli.Context, v *vault.Vault, p *progressLine) (vault.GCResult, error) {
	if c.Bool("dry-run") {
		return v.GCDryRun(c.Context)
	}
	defer p.finish()
	return v.GCWith(c.Context, vault.GCOptions{Progress: p.report()})
}

// unreadableWhy says in a few words why a vault list entry could not be
// read: its vault_unreadable reason, else its error message.
func unreadableWhy(b *wire.ErrorBody) string {
	reason, _ := b.Details["reason"].(wire.VaultFault)
	if r, ok := b.Details["reason"].(string); ok {
		reason = wire.VaultFault(r)
	}
	switch reason {
	case wire.VaultEmpty:
		return "empty file"
	case wire.VaultNotSQLite:
		return "not an SQLite file"
	case wire.VaultDamaged:
		return "damaged or truncated"
	case wire.VaultNotAVFS:
		return "not an avfs vault"
	case wire.VaultSchemaTooNew:
		return fmt.Sprintf("a newer avfs's vault, schema version %v", b.Details["schema_version"])
	case wire.VaultNotRegular:
		return "not a regular file"
	case wire.VaultDanglingLink:
		return "symbolic link to nothing"
	}
	return fmt.Sprintf("%s: %s", b.Code, b.Message)
}

func printInfo(w io.Writer, i vault.Info) error {
	var b strings.Builder
	fmt.Fprintf(&b, "name:        %s\n", i.Name)
	fmt.Fprintf(&b, "uuid:        %s\n", i.UUID)
	fmt.Fprintf(&b, "path:        %s\n", i.Path)
	fmt.Fprintf(&b, "created:     %s\n", i.CreatedAt.Local().Format(timeFmt))
	fmt.Fprintf(&b, "files:       %d\n", i.Files)
	fmt.Fprintf(&b, "size:        %s\n", humanSize(i.Bytes))
	fmt.Fprintf(&b, "file size:   %s\n", humanSize(i.FileSize))
	fmt.Fprintf(&b, "generation:  %d\n", i.Generation)
	fmt.Fprintf(&b, "checkpoints: %d\n", i.Checkpoints)
	fmt.Fprintf(&b, "quota:       %s\n", quotaString(i.Quota))
	if i.Parent != nil {
		fmt.Fprintf(&b, "parent:      %s at generation %d (forked %s)\n", i.Parent.Name, i.Parent.Generation, i.Parent.ForkedAt.Local().Format(timeFmt))
	} else {
		fmt.Fprintf(&b, "parent:      -\n")
	}
	if len(i.Forks) == 0 {
		fmt.Fprintf(&b, "forks:       -\n")
	} else {
		names := make([]string, len(i.Forks))
		for k, f := range i.Forks {
			names[k] = f.Name
		}
		fmt.Fprintf(&b, "forks:       %s\n", strings.Join(names, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
