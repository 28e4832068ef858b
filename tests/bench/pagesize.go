package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"avfs/vault"
)

func init() { register("15-pagesize", pageSizeSection) }

// pageSizes are the SQLite page sizes compared.
var pageSizes = []int{4 << 10, 16 << 10, 32 << 10, 64 << 10}

// pageSizeRounds is how many rounds each page size runs, in turns.
const pageSizeRounds = 3

// metaResult is what the vault-API workload measured for one page size.
type metaResult struct {
	Create, Stat, List, Checkpoint, Diff time.Duration
	FileSize                             int64
}

// pageSizeSection measures, for each page size, the SQLite floor of a 100
// MiB write (one transaction and 4 MiB transactions) with its cold and
// warm read-back, and a metadata-heavy vault workload, the page sizes
// taking turns within each round.
func pageSizeSection(ctx context.Context, cfg config) ([]section, error) {
	set, err := floorData(100 << 20)
	if err != nil {
		return nil, err
	}
	type acc struct {
		one, batch []floorResult
		meta       []metaResult
	}
	res := make([]acc, len(pageSizes))
	for round := range pageSizeRounds {
		order := make([]int, len(pageSizes))
		for i := range order {
			order[i] = i
			if round%2 == 1 {
				order[i] = len(pageSizes) - 1 - i
			}
		}
		for _, i := range order {
			ps := pageSizes[i]
			fmt.Fprintf(os.Stderr, "pagesize: round %d, %d KiB\n", round+1, ps>>10)
			one, err := measureFloor(ctx, filepath.Join(cfg.Work, "floor"), set, floorSpec{PageSize: ps, Reads: true})
			if err != nil {
				return nil, err
			}
			batch, err := measureFloor(ctx, filepath.Join(cfg.Work, "floor"), set, floorSpec{PageSize: ps, Batch: 4 << 20})
			if err != nil {
				return nil, err
			}
			meta, err := metaWorkload(ctx, filepath.Join(cfg.Work, "meta"), ps)
			if err != nil {
				return nil, err
			}
			res[i].one = append(res[i].one, one)
			res[i].batch = append(res[i].batch, batch)
			res[i].meta = append(res[i].meta, meta)
		}
	}
	med := func(n int, f func(j int) time.Duration) string {
		ds := make([]time.Duration, n)
		for j := range ds {
			ds[j] = f(j)
		}
		sortDur(ds)
		return fmtDur(median(ds))
	}
	mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
	floor := section{
		Title:  "SQLite page size: the floor of a 100 MiB write and its read-back",
		Intro:  fmt.Sprintf("100 MiB of distinct data stored as 64 KiB blobs keyed by SHA-256 (the vault's chunks table) in a fresh database with the vault's connection settings (avfs-wal VFS, synchronous=NORMAL, 16 MB cache, 1 GiB mmap, wal_autocheckpoint=40 MiB of log in pages of the size measured, journal_size_limit=64 MiB), at each page size; median of %d rounds, the page sizes taking turns. Close is the closing of the writer connection, which checkpoints the log into the file. Cold: every chunk read back in id order after dropping the kernel caches; warm: again. I/O: this process's /proc/self/io over write and close (one transaction).", pageSizeRounds),
		Header: []string{"page size", "write, 1 transaction", "close", "write, 4 MiB transactions", "close", "cold read", "warm read", "read syscalls / bytes", "write syscalls / bytes", "file"},
	}
	meta := section{
		Title:  "SQLite page size: metadata-heavy vault work",
		Intro:  fmt.Sprintf("Through the vault API, a vault made at each page size: 10,000 files of 100–2,000 bytes in 100 directories, one WriteFile each; Stat of each; List of each directory; a checkpoint; 100 files rewritten; Diff from the checkpoint to now. File: the vault file after Close (no log left). Median of %d rounds, in turns with the floor rows.", pageSizeRounds),
		Header: []string{"page size", "10,000 WriteFile", "10,000 Stat", "100 List", "checkpoint save", "Diff (100 changes)", "vault file"},
	}
	for i, ps := range pageSizes {
		r := res[i]
		n := len(r.one)
		io := r.one[n/2].WriteIO
		floor.Rows = append(floor.Rows, []string{
			fmt.Sprintf("%d KiB", ps>>10),
			med(n, func(j int) time.Duration { return r.one[j].Write }),
			med(n, func(j int) time.Duration { return r.one[j].Close }),
			med(n, func(j int) time.Duration { return r.batch[j].Write }),
			med(n, func(j int) time.Duration { return r.batch[j].Close }),
			med(n, func(j int) time.Duration { return r.one[j].Cold }),
			med(n, func(j int) time.Duration { return r.one[j].Warm }),
			fmt.Sprintf("%d / %s", io.SyscR, mib(io.RChar)),
			fmt.Sprintf("%d / %s", io.SyscW, mib(io.WChar)),
			mib(r.one[n/2].FileSize),
		})
		meta.Rows = append(meta.Rows, []string{
			fmt.Sprintf("%d KiB", ps>>10),
			med(n, func(j int) time.Duration { return r.meta[j].Create }),
			med(n, func(j int) time.Duration { return r.meta[j].Stat }),
			med(n, func(j int) time.Duration { return r.meta[j].List }),
			med(n, func(j int) time.Duration { return r.meta[j].Checkpoint }),
			med(n, func(j int) time.Duration { return r.meta[j].Diff }),
			mib(r.meta[n/2].FileSize),
		})
	}
	return []section{floor, meta}, nil
}

// metaWorkload runs the metadata-heavy workload on a new vault of page
// size ps under dir.
func metaWorkload(ctx context.Context, dir string, ps int) (metaResult, error) {
	var res metaResult
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp(dir, "meta-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	store := vault.NewStore(dir, vault.Options{Actor: "bench", PageSize: ps})
	v, err := store.Create(ctx, "meta")
	if err != nil {
		return res, err
	}
	defer v.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 2000)
	name := func(i int) string { return fmt.Sprintf("/d%02d/f%04d.txt", i%100, i) }
	write := func(i int) error {
		n := 100 + rng.IntN(1900)
		for j := range buf[:n] {
			buf[j] = byte(rng.Uint32())
		}
		_, err := v.WriteFile(ctx, name(i), bytes.NewReader(buf[:n]), vault.WriteOptions{Parents: true})
		return err
	}
	start := time.Now()
	for i := range 10000 {
		if err := write(i); err != nil {
			return res, err
		}
	}
	res.Create = time.Since(start)
	start = time.Now()
	for i := range 10000 {
		if _, err := v.Stat(ctx, name(i)); err != nil {
			return res, err
		}
	}
	res.Stat = time.Since(start)
	start = time.Now()
	for d := range 100 {
		if _, err := v.List(ctx, fmt.Sprintf("/d%02d", d)); err != nil {
			return res, err
		}
	}
	res.List = time.Since(start)
	start = time.Now()
	if _, err := v.SaveCheckpoint(ctx, "base", ""); err != nil {
		return res, err
	}
	res.Checkpoint = time.Since(start)
	for i := range 100 {
		if err := write(i * 97); err != nil {
			return res, err
		}
	}
	start = time.Now()
	ch, err := v.Diff(ctx, "base", "")
	if err != nil {
		return res, err
	}
	res.Diff = time.Since(start)
	if len(ch) != 100 {
		return res, fmt.Errorf("page size %d: diff found %d changes, want 100", ps, len(ch))
	}
	if err := v.Close(); err != nil {
		return res, err
	}
	fi, err := os.Stat(store.PathOf("meta"))
	if err != nil {
		return res, err
	}
	res.FileSize = fi.Size()
	return res, nil
}
