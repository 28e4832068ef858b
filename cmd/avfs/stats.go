package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"avfs/vault"
)

func statsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "stats",
		Usage: "what the vault holds and what it costs on disk: live files, deduplication, history",
		UsageText: "avfs stats\n\n" +
			"Live: the current state (unique is the size of the distinct chunks its files use).\n" +
			"Storage: the vault file (free: pages that hold nothing; unreferenced: chunks gc removes).\n" +
			"History: what is kept of the past (only: the chunks nothing but the past refers to).\n\n" +
			"example: avfs --vault work stats --json",
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			return e.withVault(c, func(v *vault.Vault) error {
				st, err := v.Stats(c.Context)
				if err != nil {
					return err
				}
				return e.emit(st, func(w io.Writer) error {
					ratio := "-"
					if st.Live.UniqueBytes > 0 {
						ratio = fmt.Sprintf("%.2f", float64(st.Live.Bytes)/float64(st.Live.UniqueBytes))
					}
					_, err := fmt.Fprintf(w, "vault %s\n"+
						"live     %d files, %d dirs, %d symlinks, %d other; %s (unique %s, dedup %s)\n"+
						"storage  %d chunks, %s; %d rows (%d live); file %s, free %s; %d unreferenced chunks\n"+
						"history  %d versions, %d checkpoints, %d marks, %d forks, %d audit rows; only %s\n",
						st.Vault,
						st.Live.Files, st.Live.Dirs, st.Live.Symlinks, st.Live.Other, humanSize(st.Live.Bytes), humanSize(st.Live.UniqueBytes), ratio,
						st.Storage.Chunks, humanSize(st.Storage.ChunkBytes), st.Storage.Rows, st.Storage.LiveRows, humanSize(st.Storage.FileSize), humanSize(st.Storage.FreeBytes), st.Storage.Unreferenced,
						st.History.Versions, st.History.Checkpoints, st.History.Marks, st.History.Forks, st.History.AuditRows, humanSize(st.History.OnlyBytes))
					return err
				})
			})
		},
	}
}
