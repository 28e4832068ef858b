package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"avfs/replicate"
	"avfs/vault"
)

func init() { register("17-replicate", replicateSection) }

const (
	replicateIdleSamples = 10               // single commits on a quiet vault
	replicateRate        = 1000             // files a second in the steady workload
	replicateLoad        = 10 * time.Second // how long it runs
	replicatePoll        = 20 * time.Millisecond
)

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// versitygw finds the S3 server (as cmd/avfs's tests do); "" when absent.
func versitygw() string {
	for _, c := range []string{os.Getenv("AVFS_VERSITYGW"), "bin/tools/versitygw"} {
		if fi, err := os.Stat(c); c != "" && err == nil && !fi.IsDir() {
			return c
		}
	}
	p, _ := exec.LookPath("versitygw")
	return p
}

// startVersity starts versitygw over dir on a free loopback port with a
// bucket "avfs"; stop kills it.
func startVersity(bin, dir string) (endpoint string, stop func(), err error) {
	for _, d := range []string{filepath.Join(dir, "data", "avfs"), filepath.Join(dir, "meta")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--access", "benchaccess", "--secret", "benchsecret0123456789", "--port", addr,
		"posix", "--sidecar", filepath.Join(dir, "meta"), filepath.Join(dir, "data"))
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return "http://" + addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("versitygw did not answer on %s: %s", addr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicaRun is one target's figures.
type replicaRun struct {
	name                string
	idle                []time.Duration
	files               int
	elapsed             time.Duration
	commits             []time.Duration
	loadLag             []time.Duration
	catchUp             time.Duration
	maxLog              int64
	replicated, skipped bool
	note                string
}

// replicateSection measures, for a vault replicated to a directory and
// (when versitygw is there) to an S3 server on loopback, and for one not
// replicated: how long a commit takes to appear in the replica on a quiet
// vault, and what a steady 1,000 files a second through the vault API
// achieves while replicating.
func replicateSection(ctx context.Context, cfg config) ([]section, error) {
	// As avfs does (cmd/avfs/replicate.go): the AWS SDK refuses
	// AWS_CA_BUNDLE with Litestream's own HTTP transport.
	if b := os.Getenv("AWS_CA_BUNDLE"); b != "" {
		if os.Getenv("SSL_CERT_FILE") == "" {
			os.Setenv("SSL_CERT_FILE", b)
		}
		os.Unsetenv("AWS_CA_BUNDLE")
	}
	runs := []*replicaRun{{name: "not replicated"}, {name: "directory", replicated: true}, {name: "S3 (versitygw, loopback)", replicated: true}}
	for _, r := range runs {
		fmt.Fprintf(os.Stderr, "replicate: %s\n", r.name)
		if err := r.measure(ctx, cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/1e6) }
	dist := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "–"
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return fmt.Sprintf("%s (%s–%s)", ms(ds[len(ds)/2]), ms(ds[0]), ms(ds[len(ds)-1]))
	}
	var rows [][]string
	for _, r := range runs {
		if r.skipped {
			rows = append(rows, []string{r.name, "skipped: " + r.note, "", "", "", "", ""})
			continue
		}
		sort.Slice(r.commits, func(i, j int) bool { return r.commits[i] < r.commits[j] })
		row := []string{r.name, dist(r.idle), fmt.Sprintf("%.0f", float64(r.files)/r.elapsed.Seconds()),
			fmt.Sprintf("%s / %s", fmtDur(median(r.commits)), fmtDur(p99(r.commits))), dist(r.loadLag), "–", fmt.Sprintf("%.1f MiB", float64(r.maxLog)/(1<<20))}
		if r.replicated {
			row[5] = ms(r.catchUp)
		}
		rows = append(rows, row)
	}
	return []section{{
		Title: "Replication: lag and a steady write workload",
		Intro: fmt.Sprintf("A vault replicated by `avfs vault replicate NAME --foreground` (Litestream, its own process, default 1 s intervals) while this process writes through the vault API. "+
			"Lag: from a commit's return to the first moment the replica's position (`replicate.Latest`, polled every %s) shows a transaction stamped at or after it; idle: %d single commits on a quiet vault, apart; under load: every 100th commit of the workload. "+
			"Workload: %d files of 1 KiB a second, one `WriteFile` (one transaction) each, paced, for %s; catch-up: from the last commit to the replica having it. Log: the largest size of the vault's write-ahead log seen. Median (min–max).",
			replicatePoll, replicateIdleSamples, replicateRate, replicateLoad),
		Header: []string{"replica", "lag, idle", "files/s achieved", "commit p50 / p99", "lag under load", "catch-up", "log, max"},
		Rows:   rows,
		Notes: []string{"Load average when this section ended: " + loadAvg() + " (a busy machine inflates the lag and the commit times; compare within the table).",
			"The lag is Litestream's: it looks at the log every second (`MonitorInterval`) and ships what it found; the position's timestamp is taken after it read the log, so a commit is counted as replicated by the first transaction stamped after it."},
	}}, nil
}

func (r *replicaRun) measure(ctx context.Context, cfg config) error {
	home, err := os.MkdirTemp(cfg.Work, "replicate-")
	if err != nil {
		return err
	}
	target := replicate.Target{URL: filepath.Join(home, "replica")}
	if strings.HasPrefix(r.name, "S3") {
		bin := versitygw()
		if bin == "" {
			r.skipped, r.note = true, "no versitygw (make deps)"
			return nil
		}
		endpoint, stop, err := startVersity(bin, filepath.Join(home, "s3"))
		if err != nil {
			return err
		}
		defer stop()
		target = replicate.Target{URL: "s3://avfs/bench", S3: replicate.S3{Endpoint: endpoint, AccessKeyID: "benchaccess", SecretAccessKey: "benchsecret0123456789"}}
		creds := filepath.Join(home, "s3.json")
		b, _ := json.Marshal(map[string]string{"access_key_id": target.S3.AccessKeyID, "secret_access_key": target.S3.SecretAccessKey})
		os.WriteFile(creds, b, 0o600)
		c, _ := json.Marshal(map[string]any{"replication": map[string]any{"s3": map[string]any{"endpoint": endpoint, "credentials_file": creds}}})
		os.WriteFile(filepath.Join(home, "config.json"), c, 0o600)
	}
	store := vault.NewStore(home, vault.Options{Actor: "bench"})
	v, err := store.Create(ctx, "w")
	if err != nil {
		return err
	}
	v.Close()
	if r.replicated {
		cmd := exec.CommandContext(ctx, cfg.Bin, "vault", "replicate", "w", "--to", target.URL, "--foreground")
		cmd.Env = append(os.Environ(), "AVFS_HOME="+home)
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(stderr.String(), "avfs: replicating vault") {
			if time.Now().After(deadline) {
				return fmt.Errorf("the replicator did not start: %s", stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if v, err = store.Open(ctx, "w"); err != nil {
		return err
	}
	defer v.Close()
	if r.replicated != v.Replicated() {
		return fmt.Errorf("vault replicated = %v, want %v", v.Replicated(), r.replicated)
	}
	payload := bytes.Repeat([]byte("x"), 1024)
	write := func(p string) (time.Duration, time.Time, error) {
		start := time.Now()
		_, err := v.WriteFile(ctx, p, bytes.NewReader(payload), vault.WriteOptions{Parents: true})
		end := time.Now()
		return end.Sub(start), end, err
	}
	// seen waits until the replica holds a transaction stamped at or
	// after t, and returns when it saw it.
	seen := func(t time.Time) (time.Time, error) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			p, err := replicate.Latest(ctx, target)
			if err != nil {
				return time.Time{}, err
			}
			if !p.UpdatedAt.Before(t.Truncate(time.Millisecond)) {
				return time.Now(), nil
			}
			if time.Now().After(deadline) {
				return time.Time{}, fmt.Errorf("the replica did not reach %s", t)
			}
			time.Sleep(replicatePoll)
		}
	}
	if r.replicated {
		for i := range replicateIdleSamples {
			_, at, err := write(fmt.Sprintf("/idle/%d", i))
			if err != nil {
				return err
			}
			s, err := seen(at)
			if err != nil {
				return err
			}
			r.idle = append(r.idle, s.Sub(at))
			time.Sleep(time.Duration(137*(i+1)%500) * time.Millisecond) // not in step with the replicator's second
		}
	}
	// The steady workload; a sampler records the replica's position.
	type obs struct {
		at      time.Time
		stamped time.Time
	}
	var (
		mu      sync.Mutex
		seenPos []obs
	)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	walPath := v.Path() + "-wal"
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for sampleCtx.Err() == nil {
			if fi, err := os.Stat(walPath); err == nil {
				mu.Lock()
				r.maxLog = max(r.maxLog, fi.Size())
				mu.Unlock()
			}
			if r.replicated {
				if p, err := replicate.Latest(sampleCtx, target); err == nil {
					mu.Lock()
					seenPos = append(seenPos, obs{time.Now(), p.UpdatedAt})
					mu.Unlock()
				}
			}
			time.Sleep(replicatePoll)
		}
	}()
	interval := time.Second / replicateRate
	n := int(replicateLoad / interval)
	var sampled []time.Time
	start := time.Now()
	var last time.Time
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		took, at, err := write(fmt.Sprintf("/load/%03d/%d", i/1000, i))
		if err != nil {
			stopSampling()
			sampler.Wait()
			return err
		}
		r.commits = append(r.commits, took)
		if i%100 == 0 {
			sampled = append(sampled, at)
		}
		last = at
	}
	r.files, r.elapsed = n, last.Sub(start)
	if r.replicated {
		s, err := seen(last)
		if err != nil {
			stopSampling()
			sampler.Wait()
			return err
		}
		r.catchUp = s.Sub(last)
	}
	stopSampling()
	sampler.Wait()
	for _, at := range sampled {
		for _, o := range seenPos {
			if !o.stamped.Before(at.Truncate(time.Millisecond)) {
				r.loadLag = append(r.loadLag, o.at.Sub(at))
				break
			}
		}
	}
	return nil
}
