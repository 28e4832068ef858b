package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"avfs/vault"
)

func init() { register("11-deep", deepBench) }

// deepBench times the change summary of a chain of new directories N
// deep (what a run that makes one reports), and a restore that removes
// it: both must grow with N, not with its square. Memory is the Go heap
// allocated while listing.
func deepBench(ctx context.Context, cfg config) ([]section, error) {
	store := vault.NewStore(filepath.Join(cfg.Work, "deep-home"), vault.Options{Actor: "bench"})
	var rows [][]string
	for _, depth := range []int{1000, 3000, 10000} {
		v, err := store.Create(ctx, fmt.Sprintf("deep%d", depth))
		if err != nil {
			return nil, err
		}
		if _, err := v.SaveCheckpoint(ctx, "before", ""); err != nil {
			v.Close()
			return nil, err
		}
		m, err := v.Mark(ctx, "deep")
		if err != nil {
			v.Close()
			return nil, err
		}
		parent := uint64(1)
		for range depth {
			a, err := v.Mknod(ctx, parent, "d", vault.NodeSpec{Kind: vault.KindDir, Mode: 0o755})
			if err != nil {
				v.Close()
				return nil, err
			}
			parent = a.Ino
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		alloc := ms.TotalAlloc
		start := time.Now()
		ch, err := v.ChangesSince(ctx, m)
		listed := time.Since(start)
		runtime.ReadMemStats(&ms)
		if err != nil {
			v.Close()
			return nil, err
		}
		start = time.Now()
		res, err := v.RestoreCheckpoint(ctx, "before")
		restored := time.Since(start)
		v.Close()
		if err != nil {
			return nil, err
		}
		if len(ch) != depth || len(res.Changes) != depth {
			return nil, fmt.Errorf("deep %d: %d changes listed, %d restored", depth, len(ch), len(res.Changes))
		}
		rows = append(rows, []string{fmt.Sprint(depth), fmt.Sprint(len(ch)), fmtDur(listed), fmt.Sprintf("%.1f MiB", float64(ms.TotalAlloc-alloc)/(1<<20)), fmtDur(restored)})
	}
	return []section{{
		Title:  "Change summary of a deep chain",
		Intro:  "A chain of N new directories (`d/d/d/…`), made after a mark and a checkpoint: the change summary since the mark (what a run that made it reports), the Go heap allocated while listing, and the restore of the checkpoint that removes it. Both must grow with N, not with its square.",
		Header: []string{"depth", "changes", "summary", "allocated", "restore"},
		Rows:   rows,
	}}, nil
}
