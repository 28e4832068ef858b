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

// serveBench times `proxy exec -- true` through `avfs serve` (the whole
// client process, and the HTTP request alone) next to running `true`
// directly, and counts /v1/decide answers per second under 8 concurrent
// clients.
func serveBench(ctx context.Context, cfg config) ([]section, error) {
	home := filepath.Join(cfg.Work, "serve-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	sock := filepath.Join(home, "run", "avfs.sock")
	daemon := exec.Command(cfg.Bin, "serve")
	daemon.Env = append(os.Environ(), "AVFS_HOME="+home)
	var logs bytes.Buffer
	daemon.Stderr = &logs
	if err := daemon.Start(); err != nil {
		return nil, err
	}
	defer func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var answer []byte // the last answer of post
	post := func(path, body string) error {
		resp, err := client.Post("http://avfs"+path, "application/json", bytes.NewBufferString(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, b)
		}
		answer = b
		return nil
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := client.Get("http://avfs/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("avfs serve does not answer: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	const runs = 30
	direct, err := timeIt(runs, func() error { return exec.Command("true").Run() })
	if err != nil {
		return nil, err
	}
	viaCLI, err := timeIt(runs, func() error {
		cmd := exec.Command(cfg.Bin, "--json", "proxy", "exec", "--server", sock, "--", "true")
		cmd.Env = append(os.Environ(), "AVFS_HOME="+home)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			return fmt.Errorf("proxy exec --server: %v %s", err, stderr.String())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Where a run's time goes: the envelope's stages (timing.*).
	stages := map[string][]float64{}
	viaHTTP, err := timeIt(runs, func() error {
		if err := post("/v1/exec", `{"argv":["true"]}`); err != nil {
			return err
		}
		var env wire.Envelope
		if err := json.Unmarshal(answer, &env); err != nil || env.Error != nil {
			return fmt.Errorf("/v1/exec: %v %s", err, answer)
		}
		tm := env.Timing
		for k, v := range map[string]float64{"policy": tm.PolicyMS, "checkpoint": tm.CheckpointMS, "mount": tm.MountMS,
			"sandbox": tm.SandboxMS, "run": tm.RunMS, "summary": tm.SummaryMS, "total": tm.TotalMS} {
			stages[k] = append(stages[k], v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var parts []string
	for _, k := range []string{"policy", "checkpoint", "mount", "sandbox", "run", "summary", "total"} {
		xs := stages[k]
		sort.Float64s(xs)
		parts = append(parts, fmt.Sprintf("%s %.2f ms", k, xs[len(xs)/2]))
	}
	load, _ := os.ReadFile("/proc/loadavg")
	p90 := func(ds []time.Duration) time.Duration { return ds[len(ds)*9/10] }
	added := func(ds []time.Duration) []string {
		return []string{fmtDur(median(ds) - median(direct)), fmtDur(p90(ds) - p90(direct))}
	}
	rows := [][]string{
		append([]string{"`true` directly (fork and exec)", fmtDur(median(direct)), fmtDur(p90(direct))}, "", ""),
		append([]string{"`avfs proxy exec --server SOCK -- true` (client process and the run)", fmtDur(median(viaCLI)), fmtDur(p90(viaCLI))}, added(viaCLI)...),
		append([]string{"`POST /v1/exec {\"argv\":[\"true\"]}` (the run alone)", fmtDur(median(viaHTTP)), fmtDur(p90(viaHTTP))}, added(viaHTTP)...),
	}

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
			Intro:  fmt.Sprintf("`proxy exec -- true` on the default vault through `avfs serve` on its Unix socket (policy compiled once), %d runs each; added is over running `true` directly. Target: under 10 ms added.", runs),
			Header: []string{"how", "median", "p90", "added (median)", "added (p90)"},
			Rows:   rows,
			Notes: []string{
				"Stages of the `POST /v1/exec` runs (median of each `timing.*` field of their envelopes: policy includes taking the open vault, checkpoint its lock, run the sandbox; total adds the clean-up): " + strings.Join(parts, ", ") + ".",
				"The daemon keeps the compiled policy and the open vaults (runner.VaultCache) across runs, and starts each sandbox's init with vfork (the init makes its namespaces itself): a run pays for the sandbox (the view's mounts), the FUSE mount and unmount, and a few SQLite transactions (lock, mark, audit).",
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
