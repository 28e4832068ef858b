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

func init() { register("41-effects", effectsBench) }

// effectsBench times the effects stage: whole-process `proxy exec -- true`
// with the stage on and off (policy.skip_effects), interleaved, and the
// stage's own time (the envelope's effects_ms) for runs that change 10,
// 1,000 and 10,000 files.
func effectsBench(ctx context.Context, cfg config) ([]section, error) {
	home := filepath.Join(cfg.Work, "effects-home")
	store := vault.NewStore(home, vault.Options{Actor: "bench"})
	v, err := store.Create(ctx, "fx")
	if err != nil {
		return nil, err
	}
	v.Close()
	off := filepath.Join(cfg.Work, "effects-off.json")
	if err := os.WriteFile(off, []byte(`{"policy": {"skip_effects": true}}`), 0o644); err != nil {
		return nil, err
	}
	run := func(config string, args ...string) (time.Duration, wire.Envelope, error) {
		cmd := exec.Command(cfg.Bin, append([]string{"--vault", "fx", "--json", "proxy", "exec"}, args...)...)
		cmd.Env = append(os.Environ(), "AVFS_HOME="+home)
		if config != "" {
			cmd.Env = append(cmd.Env, "AVFS_CONFIG="+config)
		}
		start := time.Now()
		out, _ := cmd.Output()
		d := time.Since(start)
		var env wire.Envelope
		if err := json.Unmarshal(out, &env); err != nil {
			return d, env, fmt.Errorf("%v: %v: %s", args, err, out)
		}
		if env.Error != nil {
			return d, env, fmt.Errorf("%v: %s", args, env.Error.Message)
		}
		return d, env, nil
	}
	const runs = 15
	var on, offs []time.Duration
	for i := 0; i < runs; i++ {
		for _, config := range []string{"", off} {
			d, env, err := run(config, "--", "true")
			if err != nil {
				return nil, err
			}
			if (env.Effects != nil) != (config == "") {
				return nil, fmt.Errorf("effects %+v with config %q", env.Effects, config)
			}
			if config == "" {
				on = append(on, d)
			} else {
				offs = append(offs, d)
			}
		}
	}
	sortDur(on)
	sortDur(offs)
	rows := [][]string{{"`proxy exec -- true`, whole process", fmtDur(median(offs)), fmtDur(median(on)), fmt.Sprintf("%+.1f ms", float64(median(on)-median(offs))/1e6)}}
	for _, n := range []int{10, 1000, 10000} {
		// Each run makes n new files in a directory of its own, then the
		// next round deletes them: both sides of the summary are measured.
		var total []time.Duration
		var stage []float64
		for i := 0; i < 3; i++ {
			dir := fmt.Sprintf("d%d-%d", n, i)
			script := fmt.Sprintf(`mkdir %s && cd %s && i=0; while [ $i -lt %d ]; do echo "line $i" > f$i.txt; i=$((i+1)); done`, dir, dir, n)
			d, env, err := run("", "--shell", script)
			if err != nil {
				return nil, err
			}
			if env.Effects == nil || env.ChangesTotal < n {
				return nil, fmt.Errorf("%d files: effects %+v, %d changes", n, env.Effects, env.ChangesTotal)
			}
			total = append(total, d)
			stage = append(stage, env.Timing.EffectsMS)
		}
		sortDur(total)
		sort.Float64s(stage)
		rows = append(rows, []string{fmt.Sprintf("a run that creates %s files: the effects stage", commas(n)), "—",
			fmt.Sprintf("%.1f ms", stage[len(stage)/2]), fmt.Sprintf("(whole run %s)", fmtDur(median(total)))})
	}
	return []section{{
		Title:  "proxy exec: the effects stage",
		Intro:  fmt.Sprintf("Median of %d interleaved runs for `true` (effects on, then off with `policy.skip_effects`), 3 runs for the others; the stage's own time is the envelope's `timing.effects_ms`: listing the changes with their content hashes and line counts, and deciding on them.", runs),
		Header: []string{"what", "effects off", "effects on", "added"},
		Rows:   rows,
	}}, nil
}

// commas writes n with thousands separators.
func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
