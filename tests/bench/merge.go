package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"avfs/vault"
)

func init() { register("15-merge", mergeBench) }

// The merge workload: a vault of mergeFiles files, forks of it with
// mergeChanged files changed (modified, added, deleted), each diffed and
// merged back.
const (
	mergeFiles    = 10_000
	mergeChanged  = 1_000
	mergeFileSize = 4 << 10
	mergeRounds   = 3
)

// mergeBench measures avfs vault diff and avfs vault merge (the library:
// Store.DiffVaults and Store.Merge) of a fork with 1,000 changed files in
// a vault of 10,000.
func mergeBench(ctx context.Context, cfg config) ([]section, error) {
	home := filepath.Join(cfg.Work, "merge-home")
	src := filepath.Join(cfg.Work, "merge-src")
	buf := make([]byte, mergeFileSize)
	for i := range mergeFiles {
		dir := filepath.Join(src, fmt.Sprintf("d%02d", i%100))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		_, _ = io.ReadFull(rand.Reader, buf)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), buf, 0o644); err != nil {
			return nil, err
		}
	}
	store := vault.NewStore(home, vault.Options{Actor: "bench"})
	v, err := store.Create(ctx, "base")
	if err != nil {
		return nil, err
	}
	if _, err := v.Import(ctx, src, "/"); err != nil {
		v.Close()
		return nil, err
	}
	v.Close()
	var diffs, dries, merges []time.Duration
	var changes int
	for round := range mergeRounds {
		name := fmt.Sprintf("attempt-%d", round)
		f, err := store.Fork(ctx, "base", name)
		if err != nil {
			return nil, err
		}
		// 80% modified, 10% added, 10% deleted, spread over the tree.
		for j := range mergeChanged {
			i := (round*mergeChanged + j*7) % mergeFiles
			p := fmt.Sprintf("/d%02d/f%05d", i%100, i)
			switch {
			case j%10 == 8:
				_, err = f.WriteFile(ctx, fmt.Sprintf("/d%02d/new-%d-%d", j%100, round, j), bytes.NewReader(randBytes(mergeFileSize)), vault.WriteOptions{})
			case j%10 == 9:
				_, err = f.Remove(ctx, p, false)
			default:
				_, err = f.WriteFile(ctx, p, bytes.NewReader(randBytes(mergeFileSize)), vault.WriteOptions{})
			}
			if err != nil {
				f.Close()
				return nil, err
			}
		}
		f.Close()
		for _, m := range []struct {
			into *[]time.Duration
			run  func() error
		}{
			{&diffs, func() error {
				d, err := store.DiffVaults(ctx, "base", name)
				if err == nil && len(d.Changes) != mergeChanged {
					err = fmt.Errorf("vault diff lists %d changes, want %d", len(d.Changes), mergeChanged)
				}
				return err
			}},
			{&dries, func() error {
				_, err := store.Merge(ctx, name, vault.MergeOptions{DryRun: true})
				return err
			}},
			{&merges, func() error {
				res, err := store.Merge(ctx, name, vault.MergeOptions{})
				if err == nil && (!res.Applied || len(res.Changes) != mergeChanged) {
					err = fmt.Errorf("merge applied %d changes (%v), want %d", len(res.Changes), res.Applied, mergeChanged)
				}
				changes = len(res.Changes)
				return err
			}},
		} {
			start := time.Now()
			if err := m.run(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			*m.into = append(*m.into, time.Since(start))
		}
	}
	row := func(what string, ds []time.Duration) []string {
		lo, hi := ds[0], ds[0]
		for _, d := range ds {
			lo, hi = min(lo, d), max(hi, d)
		}
		return []string{what, fmtDur(lo), fmtDur(hi)}
	}
	return []section{{
		Title: "Merging a fork back",
		Intro: fmt.Sprintf("A vault of %d files (%d KiB each, in 100 directories); %d times: fork it, change %d files in the fork "+
			"(80%% rewritten, 10%% added, 10%% deleted; new content, so every chunk is copied), then `vault diff` the two, `vault merge --dry-run` "+
			"and `vault merge` (the library calls, in process; the merge lists %d changes and copies %d KiB of chunks into the parent). "+
			"Each merge reads the three trees whole (base, parent, fork) and applies the changes in one transaction.",
			mergeFiles, mergeFileSize>>10, mergeRounds, mergeChanged, changes, mergeChanged*9/10*mergeFileSize>>10),
		Header: []string{"operation", "fastest", "slowest"},
		Rows:   [][]string{row("vault diff A B", diffs), row("vault merge --dry-run", dries), row("vault merge", merges)},
	}}, nil
}

// randBytes is n random bytes.
func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = io.ReadFull(rand.Reader, b)
	return b
}
