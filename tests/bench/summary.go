package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"avfs/vault"
)

func init() { register("14-summary", summaryBench) }

// The tree: summaryDirs directories of summaryPer files each under
// summaryTop top-level directories, like a `tar x` of a source archive.
const (
	summaryTop    = 10
	summaryDirs   = 1000
	summaryPer    = 20
	summaryRounds = 5
	summaryTarget = 300 * time.Millisecond
)

// summaryBench times the change summary since a mark (what a run reports
// at its end) after a run that created a 20,000-file tree, one that
// deleted one, and one that modified 100 files of one, against a floor
// measured in the same rounds: one query that reads every inode and
// entry row changed since the mark, which any summary must read.
func summaryBench(ctx context.Context, cfg config) ([]section, error) {
	src := filepath.Join(cfg.Work, "summary-src")
	if err := summaryTree(src); err != nil {
		return nil, err
	}
	defer os.RemoveAll(src)
	store := vault.NewStore(filepath.Join(cfg.Work, "summary-home"), vault.Options{Actor: "bench"})
	files := summaryDirs * summaryPer
	cases := []struct {
		name string
		run  func(v *vault.Vault) error
	}{
		{fmt.Sprintf("create %d files (import into /new)", files), func(v *vault.Vault) error {
			_, err := v.Import(ctx, src, "/new")
			return err
		}},
		{fmt.Sprintf("delete the %d-file tree (Remove recursive)", files), func(v *vault.Vault) error {
			_, err := v.Remove(ctx, "/tree", true)
			return err
		}},
		{"modify 100 files of the tree (WriteFile)", func(v *vault.Vault) error {
			for i := range 100 {
				d := i * (summaryDirs / 100)
				p := fmt.Sprintf("/tree/p%d/d%03d/f%02d.c", d/(summaryDirs/summaryTop), d, i%summaryPer)
				if _, err := v.WriteFile(ctx, p, bytes.NewReader([]byte("changed\n")), vault.WriteOptions{}); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	var rows [][]string
	met := "yes"
	for i, c := range cases {
		r, err := summaryCase(ctx, store, fmt.Sprintf("summary%d", i), src, c.run)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		ok := pass(r.summary < summaryTarget)
		if r.summary >= summaryTarget {
			met = "no"
		}
		rows = append(rows, []string{c.name, fmt.Sprint(r.changes), fmtDur(r.summary), fmtDur(r.floor),
			fmt.Sprintf("%.1f×", float64(r.summary)/float64(r.floor)), fmt.Sprintf("%.1f MiB", r.alloc), "< 300 ms", ok})
	}
	return []section{{
		Title: "Change summary of a large run",
		Intro: fmt.Sprintf("A vault holding a tree of %d files (a few hundred bytes each) in %d directories (`/tree/pN/dNNN/fNN.c`, imported in one transaction), then a mark, a change, and the change summary since the mark (`ChangesSince`, what a run reports at its end), median of %d rounds. "+
			"The floor, timed in the same rounds, is one query reading every inode and entry row changed since the mark (what any summary must read); allocated is the Go heap allocated by one summary.",
			files, summaryDirs, summaryRounds),
		Header: []string{"run", "changes", "summary", "floor", "summary / floor", "allocated", "target", "met"},
		Rows:   rows,
		Notes:  []string{"target met: " + met},
	}}, nil
}

// summaryTree writes the host tree that the vaults import.
func summaryTree(root string) error {
	perTop := summaryDirs / summaryTop
	for d := range summaryDirs {
		dir := filepath.Join(root, fmt.Sprintf("p%d", d/perTop), fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for f := range summaryPer {
			body := fmt.Appendf(nil, "/* file %d of directory %d */\nint f%d_%d(void) { return %d; }\n%s", f, d, d, f, f, bytes.Repeat([]byte("// filler\n"), 20))
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.c", f)), body, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

type summaryResult struct {
	changes        int
	summary, floor time.Duration
	alloc          float64 // MiB allocated by one summary
}

// summaryCase makes a vault holding the tree at /tree, takes a mark, runs
// change and times the summary since the mark against the floor.
func summaryCase(ctx context.Context, store *vault.Store, name, src string, change func(*vault.Vault) error) (summaryResult, error) {
	var r summaryResult
	v, err := store.Create(ctx, name)
	if err != nil {
		return r, err
	}
	defer v.Close()
	if _, err := v.Import(ctx, src, "/tree"); err != nil {
		return r, err
	}
	m, err := v.Mark(ctx, "bench")
	if err != nil {
		return r, err
	}
	if err := change(v); err != nil {
		return r, err
	}
	db, err := sql.Open("sqlite3", "file:"+v.Path()+"?mode=ro")
	if err != nil {
		return r, err
	}
	defer db.Close()
	// Every row changed since the mark: made after it, or closed after it.
	floorSQL := `SELECT COUNT(*), SUM(n) FROM (
		SELECT size + length(chunks) + length(xattrs) AS n FROM inodes WHERE gen_from > 1 AND gen_from > ?1
		UNION ALL SELECT size + length(chunks) + length(xattrs) FROM inodes WHERE gen_to > ?1 AND gen_to < 9223372036854775807
		UNION ALL SELECT parent + ino + length(name) FROM dentries WHERE gen_from > 1 AND gen_from > ?1
		UNION ALL SELECT parent + ino + length(name) FROM dentries WHERE gen_to > ?1 AND gen_to < 9223372036854775807)`
	var rowsChanged int64
	var sum sql.NullInt64
	var ms runtime.MemStats
	times, err := timeInTurns(summaryRounds,
		func() error {
			runtime.ReadMemStats(&ms)
			alloc := ms.TotalAlloc
			ch, err := v.ChangesSince(ctx, m)
			runtime.ReadMemStats(&ms)
			r.changes, r.alloc = len(ch), float64(ms.TotalAlloc-alloc)/(1<<20)
			return err
		},
		func() error { return db.QueryRowContext(ctx, floorSQL, m.Generation).Scan(&rowsChanged, &sum) })
	if err != nil {
		return r, err
	}
	if rowsChanged == 0 {
		return r, fmt.Errorf("no rows changed since the mark")
	}
	r.summary, r.floor = median(times[0]), median(times[1])
	return r, nil
}
