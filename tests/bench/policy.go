package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"avfs/bundles"
	"avfs/engine"
	"avfs/policies"
	"avfs/wire"
)

func init() { register("20-policy", benchPolicy) }

// policyCases are the inputs timed in process, from the engine's test data.
var policyCases = []struct{ file, label string }{
	{"ls", "allow: ls -la"},
	{"sudo_rm", "deny: sudo rm -rf /"},
	{"npm_install_in_sh_c", "sh -c: cd web && npm install"},
}

func benchPolicy(ctx context.Context, cfg config) ([]section, error) {
	warm, err := benchPolicyWarm(ctx, cfg)
	if err != nil {
		return nil, err
	}
	proc, err := benchPolicyProcess(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return []section{warm, proc}, nil
}

func loadAvg() string {
	bs, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(bs))[:3], " ")
}

// benchPolicyWarm times engine.Policy.Decide in process, the policy compiled once.
func benchPolicyWarm(ctx context.Context, cfg config) (section, error) {
	const n = 2000
	s := section{
		Title:  "Policy: warm evaluation in process",
		Intro:  fmt.Sprintf("`engine.Policy.Decide` with the default bundle, prepared once; %d evaluations per row after 200 to warm up. Inputs are `engine/testdata/policy/cases`. Includes converting the input to Rego and checking the result.", n),
		Header: []string{"input", "trace", "median", "p99", "target"},
	}
	set, err := bundles.Load(ctx, bundles.Options{IncludeDefault: true})
	if err != nil {
		return s, err
	}
	p, err := engine.NewPolicy(ctx, set, engine.PolicyOptions{})
	if err != nil {
		return s, err
	}
	for _, c := range policyCases {
		in, err := readPolicyCase(c.file)
		if err != nil {
			return s, err
		}
		for _, mode := range []string{engine.ExplainOff, engine.ExplainFull} {
			opts := engine.DecideOptions{Explain: mode}
			decide := func() error {
				res, err := p.Decide(ctx, in, opts)
				if err == nil && engine.IsFailClosed(res) {
					err = fmt.Errorf("%s failed closed: %v", c.file, res.Reasons)
				}
				return err
			}
			if _, err := timeIt(200, decide); err != nil {
				return s, err
			}
			runtime.GC()
			ds, err := timeIt(n, decide)
			if err != nil {
				return s, err
			}
			trace, target := "off", "< 50 µs median, < 1 ms p99"
			if mode != engine.ExplainOff {
				trace, target = "explain="+mode, "-"
			}
			s.Rows = append(s.Rows, []string{c.label, trace, fmtDur(median(ds)), fmtDur(p99(ds)), target})
		}
	}
	// The floor: the same call with a policy whose decision is a constant.
	floor, err := constantPolicy(ctx, cfg)
	if err != nil {
		return s, err
	}
	in, err := readPolicyCase("ls")
	if err != nil {
		return s, err
	}
	decide := func() error { _, err := floor.Decide(ctx, in, engine.DecideOptions{}); return err }
	if _, err := timeIt(200, decide); err != nil {
		return s, err
	}
	ds, err := timeIt(n, decide)
	if err != nil {
		return s, err
	}
	s.Rows = append(s.Rows, []string{"floor: ls -la, constant decision", "off", fmtDur(median(ds)), fmtDur(p99(ds)), "reference"})
	s.Notes = append(s.Notes,
		"The floor row is a bundle whose data.avfs.decision is a constant: what converting the input and one OPA evaluation cost on this machine.",
		fmt.Sprintf("Load average when this section ran: %s (on %d CPUs).", loadAvg(), runtime.NumCPU()))
	return s, nil
}

// constantPolicy compiles a bundle whose decision does not look at the input.
func constantPolicy(ctx context.Context, cfg config) (*engine.Policy, error) {
	dir := filepath.Join(cfg.Work, "constant-bundle")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := map[string]string{
		".manifest":   `{"roots": ["avfs"]}`,
		"policy.rego": "package avfs\n\ndecision := {\"decision\": \"allow\", \"reasons\": []}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	set, err := bundles.Load(ctx, bundles.Options{Paths: []string{dir}})
	if err != nil {
		return nil, err
	}
	return engine.NewPolicy(ctx, set, engine.PolicyOptions{})
}

func readPolicyCase(name string) (*wire.Input, error) {
	bs, err := os.ReadFile(filepath.Join("engine", "testdata", "policy", "cases", name+".json"))
	if err != nil {
		return nil, err
	}
	var c struct {
		Input wire.Input `json:"input"`
	}
	if err := json.Unmarshal(bs, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &c.Input, nil
}

// benchPolicyProcess times a whole `avfs policy eval -- ls` process next to
// the OPA CLI evaluating the same bundle and input.
func benchPolicyProcess(ctx context.Context, cfg config) (section, error) {
	const n = 20
	s := section{
		Title:  "Policy: whole process",
		Intro:  fmt.Sprintf("Wall time of one process, median of %d runs after one to warm the file cache. The OPA CLI is built from the version in go.mod and evaluates the default bundle (extracted from the binary) with the input `avfs policy eval --input` printed for `ls -la`.", n),
		Header: []string{"command", "median", "p90", "target"},
	}
	home := filepath.Join(cfg.Work, "policy-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return s, err
	}
	env := append(os.Environ(), "AVFS_HOME="+home, "AVFS_CONFIG=")
	run := func(stdin []byte, name string, args ...string) func() error {
		return func() error {
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Env = env
			cmd.Stdin = bytes.NewReader(stdin)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
			}
			return nil
		}
	}

	// The input document, as avfs builds it.
	cmd := exec.CommandContext(ctx, cfg.Bin, "--json", "policy", "eval", "--input", "--", "ls", "-la")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return s, fmt.Errorf("avfs policy eval --input: %w", err)
	}
	var doc struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return s, err
	}

	// The OPA CLI and the default bundle as a directory.
	opa := filepath.Join(cfg.Work, "opa")
	build := exec.CommandContext(ctx, "go", "build", "-o", opa, "github.com/open-policy-agent/opa")
	if out, err := build.CombinedOutput(); err != nil {
		return s, fmt.Errorf("build opa: %w: %s", err, out)
	}
	bundleDir := filepath.Join(cfg.Work, "default-bundle")
	if err := os.CopyFS(bundleDir, policies.FS); err != nil && !os.IsExist(err) {
		return s, err
	}
	if _, err := fs.Stat(os.DirFS(bundleDir), ".manifest"); err != nil {
		return s, err
	}

	rows := []struct {
		label string
		f     func() error
	}{
		{"`avfs policy eval -- ls -la`", run(nil, cfg.Bin, "policy", "eval", "--", "ls", "-la")},
		{"`avfs --json policy eval -- ls -la`", run(nil, cfg.Bin, "--json", "policy", "eval", "--", "ls", "-la")},
		{"`opa eval -b <default bundle> -I data.avfs.decision`", run(doc.Input, opa, "eval", "-b", bundleDir, "-I", "data.avfs.decision")},
	}
	var avfsMedian, opaMedian time.Duration
	for i, r := range rows {
		if err := r.f(); err != nil {
			return s, err
		}
		ds, err := timeIt(n, r.f)
		if err != nil {
			return s, err
		}
		target := "no slower than `opa eval`"
		switch i {
		case 0:
			avfsMedian = median(ds)
		case 2:
			opaMedian, target = median(ds), "reference"
		}
		s.Rows = append(s.Rows, []string{r.label, fmtDur(median(ds)), fmtDur(ds[len(ds)*9/10]), target})
	}
	s.Notes = append(s.Notes,
		fmt.Sprintf("avfs / opa median: %.2f.", float64(avfsMedian)/float64(opaMedian)),
		fmt.Sprintf("Load average when this section ran: %s.", loadAvg()))
	return s, nil
}
