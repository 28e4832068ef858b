package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"avfs/vault"
)

// quotaResult is the JSON document of the quota commands.
type quotaResult struct {
	Vault string `json:"vault"`
	vault.Usage
}

func quotaString(q vault.Quota) string {
	lim := func(n int64, unit string) string {
		if n == 0 {
			return "unlimited"
		}
		return fmt.Sprintf("%d%s", n, unit)
	}
	return fmt.Sprintf("size %s, files %s, file size %s", lim(q.MaxSizeMB, " MiB"), lim(q.MaxFiles, ""), lim(q.MaxFileSizeMB, " MiB"))
}

func quotaCommand(e *env) *cli.Command {
	show := func(c *cli.Context, name string, v *vault.Vault) error {
		u, err := v.Usage(c.Context)
		if err != nil {
			return err
		}
		return e.emit(quotaResult{Vault: name, Usage: u}, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "quota: %s\nusage: %d files, %s\n", quotaString(u.Quota), u.Files, humanSize(u.Bytes))
			return err
		})
	}
	change := func(c *cli.Context, qc vault.QuotaChange) error {
		name := e.vaultName()
		return e.withNamed(c, name, func(v *vault.Vault) error {
			if _, err := v.SetQuota(c.Context, qc); err != nil {
				return err
			}
			return show(c, name, v)
		})
	}
	return &cli.Command{
		Name:      "quota",
		Usage:     "show, set or clear the vault's quotas",
		UsageText: "avfs quota show|set|clear [options]\n\nexample: avfs quota set --max-size-mb 100 --max-files 1000",
		Subcommands: []*cli.Command{
			{
				Name:      "show",
				Usage:     "show the quotas and the current usage",
				UsageText: "avfs quota show\n\nexample: avfs quota show --vault work",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					name := e.vaultName()
					return e.withNamed(c, name, func(v *vault.Vault) error { return show(c, name, v) })
				},
			},
			{
				Name:  "set",
				Usage: "set quotas (0 removes one); others are kept",
				UsageText: "avfs quota set [--max-size-mb N] [--max-files N] [--max-file-size-mb N]\n" +
					"avfs quota set KEY VALUE [KEY VALUE ...]   (KEY: max_size_mb, max_files, max_file_size_mb)\n\n" +
					"example: avfs quota set --max-size-mb 100\nexample: avfs quota set max_files 10000",
				Flags: []cli.Flag{
					&cli.Int64Flag{Name: "max-size-mb", Usage: "total size of the files in `MiB`"},
					&cli.Int64Flag{Name: "max-files", Usage: "number of entries: files, directories, symlinks, named pipes and socket nodes"},
					&cli.Int64Flag{Name: "max-file-size-mb", Usage: "size of one file in `MiB`"},
				},
				Action: func(c *cli.Context) error {
					if err := setKeyValues(c, "quota set", []string{"max_size_mb", "max_files", "max_file_size_mb"}); err != nil {
						return err
					}
					var qc vault.QuotaChange
					set := false
					for flag, dst := range map[string]**int64{"max-size-mb": &qc.MaxSizeMB, "max-files": &qc.MaxFiles, "max-file-size-mb": &qc.MaxFileSizeMB} {
						if c.IsSet(flag) {
							n := c.Int64(flag)
							*dst = &n
							set = true
						}
					}
					if !set {
						return usageError("quota set: give at least one of --max-size-mb, --max-files, --max-file-size-mb")
					}
					return change(c, qc)
				},
			},
			{
				Name:      "clear",
				Usage:     "remove every quota",
				UsageText: "avfs quota clear\n\nexample: avfs quota clear --vault work",
				Action: func(c *cli.Context) error {
					if _, err := args(c, 0, 0, ""); err != nil {
						return err
					}
					var zero int64
					return change(c, vault.QuotaChange{MaxSizeMB: &zero, MaxFiles: &zero, MaxFileSizeMB: &zero})
				},
			},
		},
	}
}
