package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"avfs/wire"
)

func init() { register("45-sandbox", sandboxBench) }

// sandboxBench measures what the sandbox adds to a run: its own envelope
// timing (set-up and tear-down), and whole-process `proxy exec -- true`
// with and without it, runs taking turns; next to bubblewrap building a
// comparable sandbox in the same run.
func sandboxBench(ctx context.Context, cfg config) ([]section, error) {
	home := filepath.Join(cfg.Work, "sandbox-home")
	const runs = 41
	var inside, whole, without []time.Duration
	for i := 0; i < runs+1; i++ {
		for _, mode := range []string{"auto", "none"} {
			cmd := exec.Command(cfg.Bin, "--json", "proxy", "exec", "--sandbox", mode, "--", "true")
			cmd.Env = append(os.Environ(), "AVFS_HOME="+home)
			start := time.Now()
			out, _ := cmd.Output()
			took := time.Since(start)
			var env wire.Envelope
			if err := json.Unmarshal(out, &env); err != nil {
				return nil, fmt.Errorf("sandbox bench: %v: %s", err, out)
			}
			if env.Error != nil || env.Sandbox == nil {
				return nil, fmt.Errorf("sandbox bench: %s", out)
			}
			if i == 0 {
				continue // warm-up
			}
			if mode == "none" {
				without = append(without, took)
				continue
			}
			if env.Sandbox.Mode != wire.SandboxNamespaces {
				return nil, fmt.Errorf("sandbox bench: no sandbox here: %s", env.Sandbox.Reason)
			}
			whole = append(whole, took)
			inside = append(inside, time.Duration(env.Timing.SandboxMS*float64(time.Millisecond)))
		}
	}
	for _, ds := range [][]time.Duration{inside, whole, without} {
		sortDur(ds)
	}
	rows := [][]string{
		{"`timing.sandbox_ms` (set-up and tear-down, in the envelope)", fmtDur(median(inside)), fmtDur(p90(inside))},
		{"`avfs proxy exec -- true`, sandboxed", fmtDur(median(whole)), fmtDur(p90(whole))},
		{"`avfs proxy exec --sandbox none -- true`", fmtDur(median(without)), fmtDur(p90(without))},
	}
	notes := []string{
		fmt.Sprintf("Whole-process difference, sandboxed minus none: %s (median): the sandbox's own time above, the run directory's view and cache, and a second process on two CPUs (the kernel's answer to the probe is remembered after the first run).", fmtDur(median(whole)-median(without))),
		"Target: `timing.sandbox_ms` under 5 ms, so that `proxy exec -- true` costs no more than without a sandbox plus 5 ms.",
	}
	if bw, err := exec.LookPath("bwrap"); err == nil {
		args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "true"}
		ds, err := timeIt(runs, func() error { return exec.Command(bw, args...).Run() })
		if err != nil {
			return nil, fmt.Errorf("sandbox bench: bwrap: %v", err)
		}
		sortDur(ds)
		plain, err := timeIt(runs, func() error { return exec.Command(bw, "--ro-bind", "/", "/", "true").Run() })
		if err != nil {
			return nil, fmt.Errorf("sandbox bench: bwrap: %v", err)
		}
		sortDur(plain)
		direct, _ := timeIt(runs, func() error { return exec.Command("true").Run() })
		sortDur(direct)
		rows = append(rows,
			[]string{"`bwrap --ro-bind / / true` (whole process)", fmtDur(median(plain)), fmtDur(p90(plain))},
			[]string{"`bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --unshare-all true`", fmtDur(median(ds)), fmtDur(p90(ds))},
			[]string{"`true` alone", fmtDur(median(direct)), fmtDur(p90(direct))})
	} else {
		notes = append(notes, "bubblewrap is not installed (`make deps` installs it): no comparison in this run.")
	}
	return []section{{
		Title:  "Sandbox: set-up and tear-down per run",
		Intro:  fmt.Sprintf("%d runs of each, taking turns after one warm-up; median and 90th percentile.", runs),
		Header: []string{"what", "median", "p90"},
		Rows:   rows,
		Notes:  notes,
	}}, nil
}

func p90(ds []time.Duration) time.Duration { return ds[(len(ds)*90)/100] }
