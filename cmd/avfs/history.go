package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/urfave/cli/v2"

	"avfs/vault"
)

// versionLog is the JSON document of `avfs log`.
type versionLog struct {
	Path     string          `json:"path"`
	Versions []vault.Version `json:"versions"`
}

// pruneResult is the JSON document of `avfs prune`.
type pruneResult struct {
	Vault string `json:"vault"`
	Keep  int64  `json:"keep"`
	vault.PruneResult
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
				return e.withVault(c, func(v *vault.Vault) error {
					vs, err := v.Log(c.Context, a[0])
					if err != nil {
						return err
					}
					if vs == nil {
						vs = []vault.Version{}
					}
					vs = newestVersions(vs, limit)
					return e.emit(versionLog{Path: a[0], Versions: vs}, func(w io.Writer) error {
						rows := make([]string, len(vs))
						for i, ver := range vs {
							rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%d\t%s", ver.N, ver.Time.Local().Format(timeFmt), ver.Op, modeString(ver.Kind, ver.Mode), ver.Size, ver.Path)
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
			Name:      "prune",
			Usage:     "keep only the newest N versions of every file",
			UsageText: "avfs prune --keep N\n\nexample: avfs prune --keep 5 && avfs gc",
			Flags:     []cli.Flag{&cli.Int64Flag{Name: "keep", Usage: "versions to keep per file (at least 1)"}},
			Action: func(c *cli.Context) error {
				if _, err := args(c, 0, 0, ""); err != nil {
					return err
				}
				if !c.IsSet("keep") {
					return usageError("prune: --keep N is required")
				}
				name := e.vaultName()
				return e.withNamed(c, name, func(v *vault.Vault) error {
					res, err := v.Prune(c.Context, c.Int64("keep"))
					if err != nil {
						return err
					}
					return e.emit(pruneResult{Vault: name, Keep: c.Int64("keep"), PruneResult: res}, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "removed %d versions (run avfs gc to free their data)\n", res.Versions)
						return err
					})
				})
			},
		},
	}
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
