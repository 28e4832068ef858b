package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"avfs/vault"
)

func init() { register("16-checkpointer", checkpointerSection) }

// checkpointerRounds is how many rounds each variant runs, in turns.
const checkpointerRounds = 5

// checkpointerSection writes 100 MiB of distinct data through the vault
// API in 4 MiB transactions (one WriteFile each), with and without the
// background checkpointer (vault.Vault.StartCheckpointer), the variants
// taking turns, and times the writes and the Close after them: at once,
// and after a pause of 500 ms (a tool that finishes, then an unmount).
func checkpointerSection(ctx context.Context, cfg config) ([]section, error) {
	const total, batch = 100 << 20, 4 << 20
	data := make([]byte, total)
	if _, err := rand.Read(data); err != nil {
		return nil, err
	}
	type variant struct {
		name  string
		start bool
		pause time.Duration
	}
	variants := []variant{
		{"inline (SQLite's automatic checkpoint)", false, 0},
		{"background checkpointer", true, 0},
		{"inline, Close after 500 ms", false, 500 * time.Millisecond},
		{"background checkpointer, Close after 500 ms", true, 500 * time.Millisecond},
	}
	writes := make([][]time.Duration, len(variants))
	closes := make([][]time.Duration, len(variants))
	for round := range checkpointerRounds {
		for k := range variants {
			i := k
			if round%2 == 1 {
				i = len(variants) - 1 - k
			}
			vr := variants[i]
			fmt.Fprintf(os.Stderr, "checkpointer: round %d, %s\n", round+1, vr.name)
			dir, err := os.MkdirTemp(cfg.Work, "ckpt-")
			if err != nil {
				return nil, err
			}
			v, err := vault.NewStore(dir, vault.Options{Actor: "bench"}).Create(ctx, "w")
			if err != nil {
				return nil, err
			}
			if vr.start {
				v.StartCheckpointer()
			}
			start := time.Now()
			for off := 0; off < total; off += batch {
				if _, err := v.WriteFile(ctx, fmt.Sprintf("/f%03d", off/batch), bytes.NewReader(data[off:off+batch]), vault.WriteOptions{}); err != nil {
					v.Close()
					return nil, err
				}
			}
			writes[i] = append(writes[i], time.Since(start))
			time.Sleep(vr.pause)
			start = time.Now()
			if err := v.Close(); err != nil {
				return nil, err
			}
			closes[i] = append(closes[i], time.Since(start))
			if err := os.RemoveAll(filepath.Clean(dir)); err != nil {
				return nil, err
			}
		}
	}
	s := section{
		Title:  "Vault: checkpointing the log off the write path",
		Intro:  fmt.Sprintf("100 MiB of distinct data written through the vault API in 4 MiB transactions (25 WriteFile calls) into a new vault, then Close, which folds what is left of the write-ahead log into the file (a mount's unmount does the same). Inline: SQLite's automatic checkpoint in the commit that crosses %d MiB of log; background: `Vault.StartCheckpointer`, as a writer mount runs it. Median of %d rounds, the variants taking turns (order reversed every other round); range in brackets.", 40, checkpointerRounds),
		Header: []string{"variant", "write 100 MiB", "Close"},
	}
	for i, vr := range variants {
		sortDur(writes[i])
		sortDur(closes[i])
		w, c := writes[i], closes[i]
		s.Rows = append(s.Rows, []string{vr.name,
			fmt.Sprintf("%s (%s–%s)", fmtDur(median(w)), fmtDur(w[0]), fmtDur(w[len(w)-1])),
			fmt.Sprintf("%s (%s–%s)", fmtDur(median(c)), fmtDur(c[0]), fmtDur(c[len(c)-1]))})
	}
	return []section{s}, nil
}
