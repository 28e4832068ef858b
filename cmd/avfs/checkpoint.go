package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/vault"
)

// checkpointList is the JSON document of `avfs checkpoint list`.
type checkpointList struct {
	Vault       string             `json:"vault"`
	Checkpoints []vault.Checkpoint `json:"checkpoints"`
}

// diffResult is the JSON document of `avfs checkpoint diff`.
type diffResult struct {
	From    string         `json:"from"`
	To      string         `json:"to"` // "" for the current state
	Changes []vault.Change `json:"changes"`
}

func checkpointCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Aliases:   []string{"snapshot"},
		Usage:     "save, list, restore, delete and compare checkpoints of the vault",
		UsageText: "avfs checkpoint COMMAND [options]\n\nexample: avfs checkpoint save before-refactor -m \"clean tree\"",
		Subcommands: []*cli.Command{
			{
				Name:      "save",
				Usage:     "record the vault's current state",
				UsageText: "avfs checkpoint save [NAME] [-m DESCRIPTION]\n\nexample: avfs checkpoint save before-refactor -m \"clean tree\"",
				Flags:     []cli.Flag{&cli.StringFlag{Name: "message", Aliases: []string{"m"}, Usage: "`DESCRIPTION` of the checkpoint"}},
				Action: func(c *cli.Context) error {
					a, err := args(c, 0, 1, "[NAME]")
					if err != nil {
						return err
					}
					name := ""
					if len(a) == 1 {
						name = a[0]
					}
					return e.withVault(c, func(v *vault.Vault) error {
						cp, err := v.SaveCheckpoint(c.Context, name, c.String("message"))
						if err != nil {
							return err
						}
						return e.emit(cp, func(w io.Writer) error {
							_, err := fmt.Fprintf(w, "saved checkpoint %s\n", cpLabel(cp))
							return err
						})
					})
				},
			},
			{
				Name:      "list",
				Aliases:   []string{"ls"},
				Usage:     "list the checkpoints",
				UsageText: "avfs checkpoint list\n\nexample: avfs checkpoint list --vault work",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					name := e.vaultName()
					return e.withNamed(c, name, func(v *vault.Vault) error {
						cps, err := v.Checkpoints(c.Context)
						if err != nil {
							return err
						}
						if cps == nil {
							cps = []vault.Checkpoint{}
						}
						return e.emit(checkpointList{Vault: name, Checkpoints: cps}, func(w io.Writer) error {
							rows := make([]string, len(cps))
							for i, cp := range cps {
								rows[i] = fmt.Sprintf("%d\t%s\t%s\t%d\t%s\t%s", cp.ID, orDash(cp.Name), cp.CreatedAt.Local().Format(timeFmt), cp.Files, humanSize(cp.Bytes), cp.Description)
							}
							return table(w, "ID\tNAME\tCREATED\tFILES\tSIZE\tDESCRIPTION", rows)
						})
					})
				},
			},
			{
				Name:      "restore",
				Usage:     "return the vault to a checkpoint's state",
				UsageText: "avfs checkpoint restore ID|NAME\n\nexample: avfs checkpoint restore before-refactor",
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 1, "ID|NAME")
					if err != nil {
						return err
					}
					res, err := e.restore(c.Context, e.vaultName(), a[0])
					if err != nil {
						return err
					}
					return e.emit(res, func(w io.Writer) error {
						if err := printChanges(w, res.Changes); err != nil {
							return err
						}
						_, err := fmt.Fprintf(w, "restored checkpoint %s (%d changes)\n", cpLabel(res.Checkpoint), len(res.Changes))
						return err
					})
				},
			},
			{
				Name:    "delete",
				Aliases: []string{"rm"},
				Usage:   "delete a checkpoint, or the old ones",
				UsageText: "avfs checkpoint delete ID|NAME\n" +
					"avfs checkpoint delete [--keep N] [--older-than DURATION]\n\n" +
					"With --keep, every checkpoint but the newest N goes; with --older-than, those made\n" +
					"longer ago; with both, those beyond the newest N that are also older. The data\n" +
					"only they kept goes at the next avfs gc. The checkpoint of a run under way is\n" +
					"pinned until the run ends: deleting it fails (checkpoint_pinned), and --keep and\n" +
					"--older-than keep it (listed as pinned).\n\n" +
					"example: avfs checkpoint delete --keep 20 --older-than 72h && avfs gc",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "keep", Value: -1, DefaultText: "no limit", Usage: "keep the newest `N` checkpoints"},
					&cli.DurationFlag{Name: "older-than", Usage: "delete checkpoints made more than `DURATION` ago (24h, 90m)"},
				},
				Action: func(c *cli.Context) error {
					keep, age := c.Int("keep"), c.Duration("older-than")
					if c.IsSet("keep") || c.IsSet("older-than") {
						if c.NArg() > 0 {
							return usageError("checkpoint delete: give ID|NAME, or --keep/--older-than, not both")
						}
						if c.IsSet("keep") && keep < 0 || c.IsSet("older-than") && age <= 0 {
							return usageError("checkpoint delete: --keep needs a number of at least 0, --older-than a positive duration")
						}
						var before time.Time
						if age > 0 {
							before = time.Now().Add(-age)
						}
						return e.withVault(c, func(v *vault.Vault) error {
							cps, pinned, err := v.PruneCheckpoints(c.Context, keep, before)
							if err != nil {
								return err
							}
							return e.emit(map[string]any{"deleted": cps, "pinned": pinned}, func(w io.Writer) error {
								for _, cp := range cps {
									if _, err := fmt.Fprintf(w, "deleted checkpoint %s\n", cpLabel(cp)); err != nil {
										return err
									}
								}
								for _, cp := range pinned {
									if _, err := fmt.Fprintf(w, "kept checkpoint %s: pinned by the run under way\n", cpLabel(cp)); err != nil {
										return err
									}
								}
								_, err := fmt.Fprintf(w, "%d checkpoint(s) deleted\n", len(cps))
								if err == nil && len(pinned) > 0 {
									_, err = fmt.Fprintf(w, "%d checkpoint(s) kept: pinned by a run under way\n", len(pinned))
								}
								return err
							})
						})
					}
					a, err := args(c, 1, 1, "ID|NAME")
					if err != nil {
						return err
					}
					return e.withVault(c, func(v *vault.Vault) error {
						cp, err := v.DeleteCheckpoint(c.Context, a[0])
						if err != nil {
							return err
						}
						return e.emit(map[string]any{"deleted": cp}, func(w io.Writer) error {
							_, err := fmt.Fprintf(w, "deleted checkpoint %s\n", cpLabel(cp))
							return err
						})
					})
				},
			},
			{
				Name:      "diff",
				Usage:     "list what changed between checkpoint A and B (default: the current state)",
				UsageText: "avfs checkpoint diff A [B]\n\nexample: avfs checkpoint diff before-refactor",
				Action: func(c *cli.Context) error {
					a, err := args(c, 1, 2, "A [B]")
					if err != nil {
						return err
					}
					to := ""
					if len(a) == 2 {
						to = a[1]
					}
					return e.withVault(c, func(v *vault.Vault) error {
						ch, err := v.Diff(c.Context, a[0], to)
						if err != nil {
							return err
						}
						if ch == nil {
							ch = []vault.Change{}
						}
						return e.emit(diffResult{From: a[0], To: to, Changes: ch}, func(w io.Writer) error {
							return printChanges(w, ch)
						})
					})
				},
			},
		},
	}
}

func cpLabel(cp vault.Checkpoint) string {
	if cp.Name != "" {
		return fmt.Sprintf("%d (%s)", cp.ID, cp.Name)
	}
	return fmt.Sprint(cp.ID)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printChanges prints changes as A /path (12 B), M /path (10 B -> 12 B), D /path.
func printChanges(w io.Writer, ch []vault.Change) error {
	for _, c := range ch {
		var err error
		switch c.Op {
		case "added":
			_, err = fmt.Fprintf(w, "A %s%s\n", c.Path, sizeSuffix(c.Kind, c.SizeAfter))
		case "modified":
			if c.SizeBefore != nil && c.SizeAfter != nil && c.Kind == vault.KindFile {
				_, err = fmt.Fprintf(w, "M %s (%s -> %s)\n", c.Path, humanSize(*c.SizeBefore), humanSize(*c.SizeAfter))
			} else {
				_, err = fmt.Fprintf(w, "M %s\n", c.Path)
			}
		case "deleted":
			_, err = fmt.Fprintf(w, "D %s\n", c.Path)
		default:
			_, err = fmt.Fprintf(w, "? %s (%s)\n", c.Path, c.Op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func sizeSuffix(k vault.Kind, n *int64) string {
	if n == nil || k != vault.KindFile {
		return ""
	}
	return " (" + humanSize(*n) + ")"
}
