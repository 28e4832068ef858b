package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/vault"
	"avfs/wire"
)

// versionLog is the JSON document of `avfs log`.
type versionLog struct {
	Path     string          `json:"path"`               // as given
	PathB64  string          `json:"path_b64,omitempty"` // wire.B64 of Path
	Versions []vault.Version `json:"versions"`
}

func historyCommands(e *env) []*cli.Command {
	return []*cli.Command{
		{
			Name:      "log",
			Usage:     "list the versions of a file",
			UsageText: "avfs log [-n N] PATH\n\nexample: avfs log -n 5 /notes.txt",
			Flags:     []cli.Flag{&cli.IntFlag{Name: "max-count", Aliases: []string{"n"}, Usage: "show only the newest `N` versions (0: all)"}},
			Action: func(c *cli.Context) error {
				limit := c.Int("max-count")
				if limit < 0 {
					return usageError("log: -n needs a count of 0 or more")
				}
				a, err := args(c, 1, 1, "PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				return e.withVault(c, func(v *vault.Vault) error {
					vs, err := v.Log(c.Context, a[0])
					if err != nil {
						return err
					}
					if vs == nil {
						vs = []vault.Version{}
					}
					vs = newestVersions(vs, limit)
					return e.emit(versionLog{Path: a[0], PathB64: wire.B64(a[0]), Versions: vs}, func(w io.Writer) error {
						rows := make([]string, len(vs))
						for i, ver := range vs {
							rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%d\t%s", ver.N, ver.Time.Local().Format(timeFmt), ver.Op, modeString(ver.Kind, uint32(ver.Mode)), ver.Size, ver.Path)
						}
						return table(w, "VERSION\tTIME\tOP\tMODE\tSIZE\tPATH", rows)
					})
				})
			},
		},
		{
			Name:      "revert",
			Usage:     "make an earlier version of a file current again (as a new version)",
			UsageText: "avfs revert PATH [--to N]\n\nexample: avfs revert /notes.txt --to 2",
			Flags:     []cli.Flag{&cli.Int64Flag{Name: "to", Usage: "version `N` (default: the one before the latest)"}},
			Action: func(c *cli.Context) error {
				a, err := args(c, 1, 1, "PATH")
				if err != nil {
					return err
				}
				if err := e.vaultPaths(a); err != nil {
					return err
				}
				if c.IsSet("to") && c.Int64("to") < 1 {
					return usageError("revert: --to takes a version number (1 or more; see avfs log PATH)")
				}
				return e.withVault(c, func(v *vault.Vault) error {
					ver, err := v.Revert(c.Context, a[0], c.Int64("to"))
					if err != nil {
						return err
					}
					return e.emit(ver, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "%s is now version %d\n", ver.Path, ver.N)
						return err
					})
				})
			},
		},
		{
			Name:  "prune",
			Usage: "remove old versions of every file",
			UsageText: "avfs prune [--keep N] [--older-than DURATION] [--dry-run]\n\n" +
				"--keep N keeps the newest N versions of each file; --older-than keeps the versions younger\n" +
				"than DURATION (a Go duration such as 36h or 90m, or days: 7d). Given both, a version goes only\n" +
				"when both say so: it is not among the newest N and it is older. The newest version of each\n" +
				"file, and versions that hold a file's state at a checkpoint, are always kept. --dry-run lists\n" +
				"what would go and changes nothing. Run avfs gc afterwards to free the data.\n\n" +
				"example: avfs prune --keep 5 --older-than 7d && avfs gc",
			Flags: []cli.Flag{
				&cli.Int64Flag{Name: "keep", Usage: "versions to keep per file (at least 1)"},
				&cli.StringFlag{Name: "older-than", Usage: "keep versions younger than `DURATION` (36h, 7d)"},
				&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "list what would be removed, change nothing"},
			},
			Action: func(c *cli.Context) error {
				if _, err := args(c, 0, 0, ""); err != nil {
					return err
				}
				opts := vault.PruneOptions{Keep: c.Int64("keep"), DryRun: c.Bool("dry-run")}
				if !c.IsSet("keep") && !c.IsSet("older-than") {
					return usageError("prune: give --keep N, --older-than DURATION or both")
				}
				if c.IsSet("keep") && opts.Keep < 1 {
					return wire.Errorf(wire.CodeInvalidInput, "prune: --keep must be at least 1")
				}
				if c.IsSet("older-than") {
					d, err := parseAge(c.String("older-than"))
					if err != nil {
						return usageError("prune: --older-than: %v", err)
					}
					opts.OlderThan = d
				}
				name := e.vaultName()
				return e.withNamed(c, name, func(v *vault.Vault) error {
					res, err := v.Prune(c.Context, opts)
					if err != nil {
						return err
					}
					doc := wire.PruneResult{Vault: name, Keep: opts.Keep, OlderThan: c.String("older-than"), DryRun: opts.DryRun,
						Removed: res.Versions, Bytes: res.Bytes, Versions: res.Removed}
					return e.emit(doc, func(w io.Writer) error {
						if !opts.DryRun {
							_, err := fmt.Fprintf(w, "removed %d versions, %s (run avfs gc to free their data)\n", res.Versions, humanSize(res.Bytes))
							return err
						}
						rows := make([]string, len(res.Removed))
						for i, p := range res.Removed {
							rows[i] = fmt.Sprintf("%d\t%s\t%s\t%d\t%s", p.Version, p.Time.Local().Format(timeFmt), p.Op, p.Size, p.Path)
						}
						if len(rows) > 0 {
							if err := table(w, "VERSION\tTIME\tOP\tSIZE\tPATH", rows); err != nil {
								return err
							}
						}
						_, err := fmt.Fprintf(w, "would remove %d versions, %s\n", res.Versions, humanSize(res.Bytes))
						return err
					})
				})
			},
		},
	}
}

// parseAge reads an age: a Go duration (36h, 90m) or a number of days
// (7d, 1.5d). It must be positive.
func parseAge(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n > float64(math.MaxInt64)/float64(24*time.Hour) {
			return 0, fmt.Errorf("%q is not a duration (such as 36h, 90m or 7d)", s)
		}
		d = time.Duration(n * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration (such as 36h, 90m or 7d)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: give a positive duration", s)
	}
	return d, nil
}

// newestVersions keeps the limit versions with the highest numbers (all when
// limit is 0), in the order vs has them.
func newestVersions(vs []vault.Version, limit int) []vault.Version {
	if limit == 0 || len(vs) <= limit {
		return vs
	}
	nums := make([]int64, len(vs))
	for i, v := range vs {
		nums[i] = v.N
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] > nums[j] })
	floor := nums[limit-1]
	kept := vs[:0:0]
	for _, v := range vs {
		if v.N >= floor {
			kept = append(kept, v)
		}
	}
	return kept
}
