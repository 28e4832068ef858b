package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

func init() { register("12-cat", catBench) }

// catRSSTarget is the most resident memory `avfs cat` may take, whatever
// the file's size.
const catRSSTarget = 64 << 20

// catBench measures the peak resident memory of `avfs cat` (raw and
// --json) of a 256 MiB file of distinct chunks, beside a 1-byte file: the
// content is streamed, so the difference must not grow with the file.
func catBench(ctx context.Context, cfg config) ([]section, error) {
	const size, runs = 256 << 20, 3
	home := filepath.Join(cfg.Work, "cat-home")
	host := filepath.Join(cfg.Work, "cat-big")
	f, err := os.Create(host)
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, sum), io.LimitReader(rand.Reader, size)); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	want := sum.Sum(nil)
	env := append(os.Environ(), "AVFS_HOME="+home)
	for _, args := range [][]string{{"vault", "create", "cat", "--use"}, {"import", host, "/big"}} {
		if out, err := runBin(ctx, cfg.Bin, env, nil, args...); err != nil {
			return nil, fmt.Errorf("avfs %v: %v: %s", args, err, out)
		}
	}
	os.Remove(host)
	if out, err := runBin(ctx, cfg.Bin, env, []byte("x"), "write", "/small"); err != nil {
		return nil, fmt.Errorf("avfs write: %v: %s", err, out)
	}
	// run runs avfs cat args runs times; it returns the highest peak RSS,
	// the median time and what stdout hashed to (and its length).
	run := func(args ...string) (rss int64, d time.Duration, digest []byte, n int64, err error) {
		var ds []time.Duration
		for range runs {
			cmd := exec.CommandContext(ctx, cfg.Bin, append([]string{"cat"}, args...)...)
			cmd.Env = env
			h := &countingHash{Hash: sha256.New()}
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = h, &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				return 0, 0, nil, 0, fmt.Errorf("avfs cat %v: %v: %s", args, err, stderr.Bytes())
			}
			ds = append(ds, time.Since(start))
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				rss = max(rss, ru.Maxrss<<10) // KiB on Linux
			}
			digest, n = h.Sum(nil), h.n
		}
		sortDur(ds)
		return rss, median(ds), digest, n, nil
	}
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	var rows [][]string
	var base int64
	for _, c := range []struct {
		name string
		size int64
		args []string
		text bool // stdout must be the file
	}{
		{"avfs cat (1-byte file)", 1, []string{"/small"}, false},
		{"avfs cat", size, []string{"/big"}, true},
		{"avfs cat --json", size, []string{"/big", "--json"}, false},
	} {
		rss, d, digest, n, err := run(c.args...)
		if err != nil {
			return nil, err
		}
		if c.text && (!bytes.Equal(digest, want) || n != size) {
			return nil, fmt.Errorf("avfs cat /big printed %d bytes that are not the file", n)
		}
		if c.args[len(c.args)-1] == "--json" && n < int64(base64.StdEncoding.EncodedLen(size)) {
			return nil, fmt.Errorf("avfs cat --json printed %d bytes: too few", n)
		}
		if c.size == 1 {
			base = rss
		}
		met := "—"
		if c.size > 1 {
			met = "yes"
			if rss >= catRSSTarget {
				met = "NO"
			}
		}
		sz := mib(c.size)
		if c.size < 1<<20 {
			sz = fmt.Sprintf("%d B", c.size)
		}
		rows = append(rows, []string{c.name, sz, mib(rss), mib(rss - base), fmtDur(d), met})
	}
	return []section{{
		Title: "avfs cat: peak memory",
		Intro: "Peak resident memory (getrusage ru_maxrss, highest of 3 runs) of `avfs cat` of a file of distinct random chunks, " +
			"stdout read by the benchmark; time is the median run. The content is streamed, so memory must not grow with the file: " +
			"target under 64 MiB.",
		Header: []string{"command", "file size", "peak RSS", "over the 1-byte file", "time", "under 64 MiB"},
		Rows:   rows,
	}}, nil
}

// countingHash hashes and counts what is written to it.
type countingHash struct {
	hash.Hash
	n int64
}

func (h *countingHash) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return h.Hash.Write(p)
}
