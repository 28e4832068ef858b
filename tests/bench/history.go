package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

func init() { register("13-history", historyBench) }

// historyRatioTarget is the most the vault file may be, as a multiple of
// its live data, after the workload.
const historyRatioTarget = 3.0

// The workload: an fsx-like run of small random writes to one file, each
// made durable (so each is a version), interleaved with an npm-install-
// sized tree written and deleted again.
const (
	historyFileSize = 30 << 20
	historyWrites   = 50_000
	historyCycles   = 10
	historyTreeDirs = 400
	historyTreeFile = 10 // files per directory
)

// historyBench runs the workload through `avfs mount` twice, with the
// default retention and with retention off, and reports the vault file
// against its live data.
func historyBench(ctx context.Context, cfg config) ([]section, error) {
	var rows [][]string
	met := "yes"
	for _, variant := range []struct {
		name string
		args []string // how the vault's retention is set
	}{
		{"retention (defaults)", nil},
		{"retention off", []string{"retention", "off"}},
	} {
		r, err := historyRun(ctx, cfg, variant.args)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", variant.name, err)
		}
		ratio := float64(r.file) / float64(r.live)
		ok := "—"
		if variant.args == nil {
			ok = "yes"
			if ratio >= historyRatioTarget {
				ok, met = "NO", "NO"
			}
		}
		mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
		rows = append(rows, []string{variant.name, mib(r.live), mib(r.file), fmt.Sprintf("%.2f×", ratio), fmt.Sprint(r.versions),
			mib(r.afterGC), fmtDur(r.took), ok})
	}
	return []section{{
		Title: "History: bounded by retention",
		Intro: fmt.Sprintf("Through `avfs mount`: %d random writes (1–16 KiB, each followed by fdatasync, so each is a version) to one %d MiB file, "+
			"interleaved with a tree of %d files in %d directories (1–16 KiB each, a few of 256 KiB; an npm install's size) written and deleted %d times. "+
			"Then the server is stopped and the vault file and its WAL measured against the live data. Target: under %.0f× the live data with the default retention "+
			"(32 versions per file, 30 days, history within 50%% of the live data, at least 16 MiB), with nothing run by hand. "+
			"`after gc` is the file after `avfs gc` compacts it.",
			historyWrites, historyFileSize>>20, historyTreeDirs*historyTreeFile, historyTreeDirs, historyCycles, historyRatioTarget),
		Header: []string{"vault", "live data", "vault file", "file / live", "versions", "after gc", "workload time", "under 3×"},
		Rows:   rows,
		Notes:  []string{"target met: " + met},
	}}, nil
}

type historyResult struct {
	live, file, afterGC int64
	versions            int64
	took                time.Duration
}

func historyRun(ctx context.Context, cfg config, setup []string) (historyResult, error) {
	var res historyResult
	work, err := os.MkdirTemp(cfg.Work, "history-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	home, mnt := filepath.Join(work, "home"), filepath.Join(work, "mnt")
	env := append(os.Environ(), "AVFS_HOME="+home)
	steps := [][]string{{"vault", "create", "h", "--use"}}
	if setup != nil {
		steps = append(steps, setup)
	}
	for _, args := range steps {
		if out, err := runBin(ctx, cfg.Bin, env, nil, args...); err != nil {
			return res, fmt.Errorf("avfs %v: %v: %s", args, err, out)
		}
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return res, err
	}
	server := exec.Command(cfg.Bin, "--json", "mount", mnt)
	server.Env, server.Stderr = env, os.Stderr
	out, _ := server.StdoutPipe()
	if err := server.Start(); err != nil {
		return res, err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		server.Process.Signal(syscall.SIGTERM)
		return server.Wait()
	}
	defer stop()
	if line, _ := bufio.NewReader(out).ReadString('\n'); !json.Valid([]byte(line)) {
		return res, fmt.Errorf("avfs mount: %q", line)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := 0; i+8 <= n; i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				b[i+j] = byte(v >> (8 * j))
			}
		}
		return b
	}
	start := time.Now()
	big := filepath.Join(mnt, "data.bin")
	if err := os.WriteFile(big, data(historyFileSize), 0o644); err != nil {
		return res, err
	}
	f, err := os.OpenFile(big, os.O_RDWR, 0)
	if err != nil {
		return res, err
	}
	defer f.Close()
	for cycle := range historyCycles {
		for range historyWrites / historyCycles {
			n := 1<<10 + rng.IntN(15<<10)
			if _, err := f.WriteAt(data(n), rng.Int64N(historyFileSize-int64(n))); err != nil {
				return res, err
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				return res, err
			}
		}
		tree := filepath.Join(mnt, "node_modules")
		for d := range historyTreeDirs {
			dir := filepath.Join(tree, fmt.Sprintf("pkg-%d", d), "lib")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return res, err
			}
			for i := range historyTreeFile {
				n := 1<<10 + rng.IntN(15<<10)
				if i == 0 && d%20 == 0 {
					n = 256 << 10
				}
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d-%d.js", cycle, i)), data(n), 0o644); err != nil {
					return res, err
				}
			}
		}
		if err := os.RemoveAll(tree); err != nil {
			return res, err
		}
	}
	if err := f.Close(); err != nil {
		return res, err
	}
	res.took = time.Since(start)
	if err := stop(); err != nil {
		return res, fmt.Errorf("avfs mount: %v", err)
	}
	size := func() int64 {
		var n int64
		for _, suffix := range []string{"", "-wal"} {
			if fi, err := os.Stat(filepath.Join(home, "vaults", "h.avfs"+suffix)); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	res.file = size()
	var st struct {
		Live     int64 `json:"live_bytes"`
		Versions int64 `json:"versions"`
	}
	b, err := runBin(ctx, cfg.Bin, env, nil, "retention", "show", "--json")
	if err != nil {
		return res, fmt.Errorf("avfs retention show: %v: %s", err, b)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return res, err
	}
	res.live, res.versions = st.Live, st.Versions
	if b, err := runBin(ctx, cfg.Bin, env, nil, "gc"); err != nil {
		return res, fmt.Errorf("avfs gc: %v: %s", err, b)
	}
	res.afterGC = size()
	return res, nil
}
