package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"avfs/vault"
	"avfs/wire"
)

func init() { register("40-proxy", proxyBench) }

// proxyBench times whole-process `avfs proxy exec` for each decision next
// to running the command directly, on an empty vault and on one with
// 10,000 files, with the stage breakdown from the envelopes.
func proxyBench(ctx context.Context, cfg config) ([]section, error) {
	home := filepath.Join(cfg.Work, "proxy-home")
	store := vault.NewStore(home, vault.Options{Actor: "bench"})
	empty, err := store.Create(ctx, "empty")
	if err != nil {
		return nil, err
	}
	empty.Close()
	big, err := store.Create(ctx, "big")
	if err != nil {
		return nil, err
	}
	src := filepath.Join(cfg.Work, "proxy-src")
	for i := 0; i < 10000; i++ {
		d := filepath.Join(src, fmt.Sprintf("d%02d", i%100))
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d", i)), []byte(fmt.Sprint("file ", i)), 0o644); err != nil {
			return nil, err
		}
	}
	if _, err := big.Import(ctx, src, "/"); err != nil {
		return nil, err
	}
	big.Close()
	os.RemoveAll(src)

	const runs = 15
	direct, err := timeIt(runs, func() error { return exec.Command("true").Run() })
	if err != nil {
		return nil, err
	}
	cases := []struct {
		label string
		args  []string
	}{
		{"allow (`true`)", []string{"--", "true"}},
		{"allow_with_checkpoint (`rm -f absent`)", []string{"--", "rm", "-f", "absent"}},
		{"deny (`cat /srv/x`)", []string{"--", "cat", "/srv/x"}},
		{"require_approval (`curl x`)", []string{"--", "curl", "http://x.invalid"}},
	}
	var rows [][]string
	for _, v := range []string{"empty", "big"} {
		for _, c := range cases {
			var totals []time.Duration
			var stages []wire.Timing
			for i := 0; i < runs; i++ {
				args := append([]string{"--vault", v, "--json", "proxy", "exec"}, c.args...)
				cmd := exec.Command(cfg.Bin, args...)
				cmd.Env = append(os.Environ(), "AVFS_HOME="+home)
				start := time.Now()
				out, _ := cmd.Output()
				totals = append(totals, time.Since(start))
				var env wire.Envelope
				if err := json.Unmarshal(out, &env); err != nil {
					return nil, fmt.Errorf("%s: %v: %s", c.label, err, out)
				}
				if env.Error != nil {
					return nil, fmt.Errorf("%s: %s", c.label, env.Error.Message)
				}
				stages = append(stages, env.Timing)
			}
			sortDur(totals)
			med := func(f func(wire.Timing) float64) string {
				xs := make([]float64, len(stages))
				for i, s := range stages {
					xs[i] = f(s)
				}
				sort.Float64s(xs)
				return fmt.Sprintf("%.1f", xs[len(xs)/2])
			}
			added := median(totals) - median(direct)
			vaultLabel := "empty"
			if v == "big" {
				vaultLabel = "10,000 files"
			}
			rows = append(rows, []string{c.label, vaultLabel, fmtDur(median(totals)), fmtDur(added),
				med(func(t wire.Timing) float64 { return t.PolicyMS }), med(func(t wire.Timing) float64 { return t.CheckpointMS }),
				med(func(t wire.Timing) float64 { return t.MountMS }), med(func(t wire.Timing) float64 { return t.RunMS }),
				med(func(t wire.Timing) float64 { return t.SummaryMS }), med(func(t wire.Timing) float64 { return t.TotalMS })})
		}
	}
	return []section{{
		Title:  "proxy exec: whole process, by decision",
		Intro:  fmt.Sprintf("Median of %d runs. Running `true` directly: %s. Stage columns are the envelope's timing medians in ms.", runs, fmtDur(median(direct))),
		Header: []string{"decision", "vault", "avfs proxy exec", "added over `true`", "policy", "checkpoint", "mount", "run", "summary", "in-process total"},
		Rows:   rows,
		Notes:  []string{"Target: under 40 ms added over running the command directly at 10,000 files, checkpoint, mount and change summary included."},
	}}, nil
}
