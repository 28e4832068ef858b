package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"avfs/vault"
)

func init() { register("10-vault", vaultBench) }

// vaultBench measures the vault library and CLI on 10,000 files / 256 MiB.
func vaultBench(ctx context.Context, cfg config) ([]section, error) {
	const files, total = 10000, 256 << 20
	home := filepath.Join(cfg.Work, "vault-home")
	src := filepath.Join(cfg.Work, "vault-src")
	per := total / files
	buf := make([]byte, per)
	for i := 0; i < files; i++ {
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
	v, err := store.Create(ctx, "big")
	if err != nil {
		return nil, err
	}
	defer v.Close()
	start := time.Now()
	if _, err := v.Import(ctx, src, "/"); err != nil {
		return nil, err
	}
	importDur := time.Since(start)
	os.RemoveAll(src)
	info, _ := v.Info(ctx)

	saves, err := timeIt(20, func() error { _, err := v.SaveCheckpoint(ctx, "", ""); return err })
	if err != nil {
		return nil, err
	}
	// Restore after changing 100 files.
	cp, err := v.SaveCheckpoint(ctx, "base", "")
	if err != nil {
		return nil, err
	}
	var restores []time.Duration
	for r := 0; r < 5; r++ {
		for i := 0; i < 100; i++ {
			p := fmt.Sprintf("/d%02d/f%05d", i%100, i)
			if _, err := v.WriteFile(ctx, p, bytes.NewReader([]byte("changed")), vault.WriteOptions{}); err != nil {
				return nil, err
			}
		}
		s := time.Now()
		if _, err := v.RestoreCheckpoint(ctx, cp.Name); err != nil {
			return nil, err
		}
		restores = append(restores, time.Since(s))
	}
	sortDur(restores)
	var forks []time.Duration
	var forkSize int64
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("fork%d", i)
		s := time.Now()
		f, err := store.Fork(ctx, "big", name)
		if err != nil {
			return nil, err
		}
		forks = append(forks, time.Since(s))
		fi, _ := f.Info(ctx)
		forkSize = fi.FileSize
		f.Close()
	}
	sortDur(forks)
	v.Close()

	// Whole-process CLI timings.
	cli := func(args ...string) func() error {
		return func() error {
			cmd := exec.Command(cfg.Bin, args...)
			cmd.Env = append(os.Environ(), "AVFS_HOME="+home)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %v: %s", args, err, out)
			}
			return nil
		}
	}
	cliSave, err := timeIt(10, cli("--vault", "big", "checkpoint", "save"))
	if err != nil {
		return nil, err
	}
	n := 0
	cliFork, err := timeIt(5, func() error {
		n++
		return cli("vault", "fork", "big", fmt.Sprintf("cli%d", n))()
	})
	if err != nil {
		return nil, err
	}
	rows := [][]string{
		{"import 10,000 files / 256 MiB", fmtDur(importDur), "", ""},
		{"checkpoint save (library, median of 20)", fmtDur(median(saves)), "< 5 ms", pass(median(saves) < 5*time.Millisecond)},
		{"checkpoint restore after 100 changed files (library, median of 5)", fmtDur(median(restores)), "< 200 ms", pass(median(restores) < 200*time.Millisecond)},
		{"vault fork (library, median of 5)", fmtDur(median(forks)), "< 20 ms", pass(median(forks) < 20*time.Millisecond)},
		{"fork file size", fmt.Sprintf("%s (%.2f%% of %s)", human(forkSize), 100*float64(forkSize)/float64(info.FileSize), human(info.FileSize)), "< 5%", pass(float64(forkSize) < 0.05*float64(info.FileSize))},
		{"`avfs checkpoint save` whole process (median of 10)", fmtDur(median(cliSave)), "< 40 ms", pass(median(cliSave) < 40*time.Millisecond)},
		{"`avfs vault fork` whole process (median of 5)", fmtDur(median(cliFork)), "< 40 ms", pass(median(cliFork) < 40*time.Millisecond)},
	}
	through, err := throughput(ctx, filepath.Join(cfg.Work, "tp-home"))
	if err != nil {
		return nil, err
	}
	return []section{
		{Title: "Vault: 10,000 files, 256 MiB", Header: []string{"operation", "time", "target", "met"}, Rows: rows,
			Notes: []string{"Random content (no deduplication). Restore is measured after rewriting 100 files since the checkpoint."}},
		{Title: "Vault API throughput", Header: []string{"file size", "files", "write", "read"}, Rows: through,
			Notes: []string{"One WriteFile / ReadFile call (one transaction) per file, random content, through the library API."}},
	}, nil
}

func throughput(ctx context.Context, home string) ([][]string, error) {
	store := vault.NewStore(home, vault.Options{Actor: "bench"})
	var rows [][]string
	for _, c := range []struct {
		size, n int
		label   string
	}{{1 << 10, 2000, "1 KB"}, {64 << 10, 500, "64 KB"}, {1 << 20, 64, "1 MB"}} {
		v, err := store.Create(ctx, "tp"+fmt.Sprint(c.size))
		if err != nil {
			return nil, err
		}
		data := make([]byte, c.size)
		start := time.Now()
		for i := 0; i < c.n; i++ {
			_, _ = io.ReadFull(rand.Reader, data)
			if _, err := v.WriteFile(ctx, fmt.Sprintf("/f%d", i), bytes.NewReader(data), vault.WriteOptions{}); err != nil {
				return nil, err
			}
		}
		w := time.Since(start)
		start = time.Now()
		for i := 0; i < c.n; i++ {
			if _, err := v.ReadFile(ctx, fmt.Sprintf("/f%d", i), io.Discard); err != nil {
				return nil, err
			}
		}
		r := time.Since(start)
		mb := float64(c.size*c.n) / (1 << 20)
		rows = append(rows, []string{c.label, fmt.Sprint(c.n),
			fmt.Sprintf("%.1f MB/s (%.0f files/s)", mb/w.Seconds(), float64(c.n)/w.Seconds()),
			fmt.Sprintf("%.1f MB/s (%.0f files/s)", mb/r.Seconds(), float64(c.n)/r.Seconds())})
		v.Close()
	}
	return rows, nil
}

func pass(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
