package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"avfs/wire"
)

func init() { register("45-serve", serveBench) }

// daemon is an avfs serve started for a benchmark, with its own home.
type daemon struct {
	cmd    *exec.Cmd
	sock   string
	home   string
	client *http.Client
	logs   bytes.Buffer
	answer []byte // the last answer of post
}

// startDaemon starts `avfs serve ARGS...` in a home of its own under
// cfg.Work and waits until it answers.
func startDaemon(cfg config, name string, args ...string) (*daemon, error) {
	d := &daemon{home: filepath.Join(cfg.Work, name)}
	if err := os.MkdirAll(d.home, 0o700); err != nil {
		return nil, err
	}
	d.sock = filepath.Join(d.home, "run", "avfs.sock")
	d.cmd = exec.Command(cfg.Bin, append([]string{"serve"}, args...)...)
	d.cmd.Env = append(os.Environ(), "AVFS_HOME="+d.home)
	d.cmd.Stderr = &d.logs
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	d.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
	}}}
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := d.client.Get("http://avfs/health")
		if err == nil {
			resp.Body.Close()
			return d, nil
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("avfs serve does not answer: %s", d.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
}

func (d *daemon) post(path, body string) error {
	resp, err := d.client.Post("http://avfs"+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	d.answer = b
	return nil
}

// exec posts `true` to /v1/exec and adds the envelope's stages to stages.
func (d *daemon) exec(stages map[string][]float64) error {
	if err := d.post("/v1/exec", `{"argv":["true"]}`); err != nil {
		return err
	}
	var env wire.Envelope
	if err := json.Unmarshal(d.answer, &env); err != nil || env.Error != nil {
		return fmt.Errorf("/v1/exec: %v %s", err, d.answer)
	}
	tm := env.Timing
	for k, v := range map[string]float64{"policy": tm.PolicyMS, "checkpoint": tm.CheckpointMS, "mount": tm.MountMS,
		"sandbox": tm.SandboxMS, "run": tm.RunMS, "summary": tm.SummaryMS, "total": tm.TotalMS} {
		stages[k] = append(stages[k], v)
	}
	return nil
}

// sandboxes reads the daemon's counts of prepared sandboxes.
func (d *daemon) sandboxes() (wire.ServeSandboxes, error) {
	resp, err := d.client.Get("http://avfs/v1/status")
	if err != nil {
		return wire.ServeSandboxes{}, err
	}
	defer resp.Body.Close()
	var st wire.ServeStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Sandboxes == nil {
		return wire.ServeSandboxes{}, fmt.Errorf("/v1/status: %v (sandboxes %v)", err, st.Sandboxes)
	}
	return *st.Sandboxes, nil
}

// stageList is the median of each stage, in the envelope's order.
func stageList(stages map[string][]float64) string {
	var parts []string
	for _, k := range []string{"policy", "checkpoint", "mount", "sandbox", "run", "summary", "total"} {
		xs := stages[k]
		sort.Float64s(xs)
		parts = append(parts, fmt.Sprintf("%s %.2f ms", k, xs[len(xs)/2]))
	}
	return strings.Join(parts, ", ")
}

// agentPause is the idle time before each paced run: far shorter than
// an agent's turn (the model thinks for seconds between commands), long
// enough for the daemon to prepare the next sandbox.
const agentPause = 150 * time.Millisecond

// serveBench times `proxy exec -- true` through `avfs serve` (the whole
// client process, and the HTTP request alone) next to running `true`
// directly: runs paced as an agent's are (agentPause of idle before each,
// not timed) and back to back, with sandboxes prepared ahead and built for
// each run, the rows taking turns. It also counts /v1/decide answers per
// second under 8 concurrent clients.
func serveBench(ctx context.Context, cfg config) ([]section, error) {
	prep, err := startDaemon(cfg, "serve-home")
	if err != nil {
		return nil, err
	}
	defer prep.stop()
	built, err := startDaemon(cfg, "serve-home-built", "--prepare-sandboxes=false")
	if err != nil {
		return nil, err
	}
	defer built.stop()
	const runs = 30
	var direct, viaCLI, viaCLIBuilt, paced, pacedBuilt, backToBack, backBuilt []time.Duration
	stPaced, stBuilt, stBack := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	timed := func(into *[]time.Duration, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return err
		}
		*into = append(*into, time.Since(start))
		return nil
	}
	for i := range runs + 1 {
		keep := func(into *[]time.Duration) *[]time.Duration {
			if i == 0 {
				return new([]time.Duration) // warm-up
			}
			return into
		}
		if err := timed(keep(&direct), func() error { return exec.Command("true").Run() }); err != nil {
			return nil, err
		}
		// Both daemons answer the same runs, so that they have the same
		// history when their back-to-back runs are compared.
		for _, d := range []*daemon{prep, built} {
			into := &viaCLI
			if d == built {
				into = &viaCLIBuilt
			}
			time.Sleep(agentPause)
			if err := timed(keep(into), func() error {
				cmd := exec.Command(cfg.Bin, "--json", "proxy", "exec", "--server", d.sock, "--", "true")
				cmd.Env = append(os.Environ(), "AVFS_HOME="+d.home)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil || stderr.Len() > 0 {
					return fmt.Errorf("proxy exec --server: %v %s", err, stderr.String())
				}
				return nil
			}); err != nil {
				return nil, err
			}
		}
		time.Sleep(agentPause)
		if err := timed(keep(&paced), func() error { return prep.exec(stPaced) }); err != nil {
			return nil, err
		}
		time.Sleep(agentPause)
		if err := timed(keep(&pacedBuilt), func() error { return built.exec(stBuilt) }); err != nil {
			return nil, err
		}
	}
	// Blocks of 10 runs, taking turns, so that neither daemon has the
	// quieter part of the run.
	for _, d := range []*daemon{prep, built, built, prep, prep, built} {
		time.Sleep(agentPause)
		for i := range runs/3 + 1 {
			into, stages := &backToBack, stBack
			if d == built {
				into, stages = &backBuilt, map[string][]float64{}
			}
			if i == 0 {
				into = new([]time.Duration)
			}
			if err := timed(into, func() error { return d.exec(stages) }); err != nil {
				return nil, err
			}
		}
	}
	for _, ds := range [][]time.Duration{direct, viaCLI, viaCLIBuilt, paced, pacedBuilt, backToBack, backBuilt} {
		sortDur(ds)
	}
	counts, err := prep.sandboxes()
	if err != nil {
		return nil, err
	}
	load, _ := os.ReadFile("/proc/loadavg")
	p90 := func(ds []time.Duration) time.Duration { return ds[len(ds)*9/10] }
	added := func(ds []time.Duration) []string {
		return []string{fmtDur(median(ds) - median(direct)), fmtDur(p90(ds) - p90(direct))}
	}
	row := func(name string, ds []time.Duration) []string {
		return append([]string{name, fmtDur(median(ds)), fmtDur(p90(ds))}, added(ds)...)
	}
	rows := [][]string{
		append([]string{"`true` directly (fork and exec)", fmtDur(median(direct)), fmtDur(p90(direct))}, "", ""),
		row("`avfs proxy exec --server SOCK -- true` (client process and the run), paced, sandbox prepared", viaCLI),
		row("the same, paced, sandbox built for the run", viaCLIBuilt),
		row("`POST /v1/exec {\"argv\":[\"true\"]}` (the run alone), paced, sandbox prepared", paced),
		row("the same, paced, sandbox built for the run (`--prepare-sandboxes=false`)", pacedBuilt),
		row("the same, back to back, with prepared sandboxes", backToBack),
		row("the same, back to back, sandbox built for the run", backBuilt),
	}
	post := prep.post
	const clients, span = 8, 2 * time.Second
	var n, failed atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(span)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				if err := post("/v1/decide", `{"argv":["git","status"]}`); err != nil {
					failed.Add(1)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		return nil, fmt.Errorf("/v1/decide failed under load")
	}
	rate := float64(n.Load()) / time.Since(start).Seconds()
	return []section{
		{
			Title:  "avfs serve: a run through the daemon",
			Intro:  fmt.Sprintf("`proxy exec -- true` on the default vault through `avfs serve` on its Unix socket (policy compiled once), %d runs each after one to warm up, the rows taking turns; added is over running `true` directly. Paced runs come after %s of idle (not timed), as an agent's commands come between the model's turns; back-to-back runs follow each other at once. Target: under 10 ms added.", runs, agentPause),
			Header: []string{"how", "median", "p90", "added (median)", "added (p90)"},
			Rows:   rows,
			Notes: []string{
				"Stages (median of each `timing.*` field of the envelopes: policy includes taking the open vault, checkpoint its lock, run the sandbox; total adds the clean-up). Paced, prepared: " + stageList(stPaced) + ". Paced, built: " + stageList(stBuilt) + ". Back to back, prepared: " + stageList(stBack) + ".",
				fmt.Sprintf("The prepared daemon's sandboxes: %d runs took a prepared one, %d had one built (%d prepared, %d failed).", counts.Taken, counts.Built, counts.Prepared, counts.Failed),
				"The daemon keeps the compiled policy and the open vaults (runner.VaultCache) across runs, and starts each sandbox's init with vfork (the init makes its namespaces itself). A prepared sandbox (sandbox.Pool) has its namespaces and the run-independent part of its view (/etc, /dev, the system directories, the home: about 70 mounts) built once no run has been under way for 50 ms; its run adds the workspace (a clone of the FUSE mount moved into the view), Landlock and the command. A run then pays for the FUSE mount and unmount and a few SQLite transactions (lock, mark, audit). Back to back (blocks of 10 runs, each after one to warm up, the daemons taking turns), no sandbox is prepared (nothing is quiet for 50 ms), so both daemons build each run's but the first of a block.",
				"The client row adds an avfs process start (the package initialisers of its dependencies: OPA, protobuf, go-fuse) to the run.",
				fmt.Sprintf("Load average when this section ran: %s.", strings.Join(strings.Fields(string(load))[:3], " ")),
			},
		},
		{
			Title:  "avfs serve: decisions per second",
			Intro:  fmt.Sprintf("`POST /v1/decide {\"argv\":[\"git\",\"status\"]}` from %d concurrent clients over %s on keep-alive connections.", clients, span),
			Header: []string{"clients", "decisions", "per second"},
			Rows:   [][]string{{fmt.Sprint(clients), fmt.Sprint(n.Load()), fmt.Sprintf("%.0f", rate)}},
		},
	}, nil
}
