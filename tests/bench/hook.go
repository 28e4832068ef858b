package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

func init() { register("46-hook", hookBench) }

// hookBench times one-shot `avfs hook claude-code` answering a PreToolUse
// payload for a command the policy allows (the answer rewrites it to run
// through proxy exec), next to the process start of `avfs --help`.
func hookBench(ctx context.Context, cfg config) ([]section, error) {
	const n = 20
	s := section{
		Title:  "Hooks: one-shot `avfs hook claude-code`",
		Intro:  fmt.Sprintf("Wall time of answering a recorded Claude Code PreToolUse payload for `git status` (allowed, rewritten to run through `avfs proxy exec`): one process, one process asking `avfs serve`, and the daemon's hook endpoint alone; median and 90th percentile of %d runs after one to warm the file cache; the rows take turns. Target: under 30 ms for an allow.", n),
		Header: []string{"command", "median", "p90", "target"},
	}
	home := filepath.Join(cfg.Work, "hook-home")
	project := filepath.Join(cfg.Work, "hook-project")
	for _, d := range []string{home, project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	env := append(os.Environ(), "AVFS_HOME="+home)
	if out, err := runBin(ctx, cfg.Bin, env, nil, "vault", "create", "hooked"); err != nil {
		return nil, fmt.Errorf("vault create: %v: %s", err, out)
	}
	payload, err := json.Marshal(map[string]any{
		"session_id": "bench", "transcript_path": filepath.Join(project, "t.jsonl"), "cwd": project,
		"permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
		"tool_input":  map[string]any{"command": "git status", "description": "Show the status", "timeout": 120000, "run_in_background": false},
		"tool_use_id": "toolu_bench",
	})
	if err != nil {
		return nil, err
	}
	hook := func() error {
		out, err := runBin(ctx, cfg.Bin, env, payload, "--vault", "hooked", "hook", "claude-code", "--project", project)
		if err != nil {
			return fmt.Errorf("hook: %v: %s", err, out)
		}
		if !bytes.Contains(out, []byte(`"permissionDecision":"allow"`)) {
			return fmt.Errorf("hook did not allow git status: %s", out)
		}
		return nil
	}
	help := func() error {
		_, err := runBin(ctx, cfg.Bin, env, nil, "--help")
		return err
	}
	// The same through avfs serve: the command hook with --server, and the
	// daemon's POST /v1/hooks/claude-code (what an HTTP hook costs the
	// daemon, a new connection each time, no process started).
	sock := filepath.Join(home, "run", "avfs.sock")
	daemon := exec.Command(cfg.Bin, "serve")
	daemon.Env = env
	var logs bytes.Buffer
	daemon.Stderr = &logs
	if err := daemon.Start(); err != nil {
		return nil, err
	}
	defer func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
	}()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := client.Get("http://avfs/health"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("avfs serve does not answer: %s", logs.String())
		}
	}
	served := func() error {
		out, err := runBin(ctx, cfg.Bin, env, payload, "--vault", "hooked", "hook", "claude-code", "--project", project, "--server", sock)
		if err != nil || !bytes.Contains(out, []byte(`"permissionDecision":"allow"`)) || !bytes.Contains(out, []byte("--server")) {
			return fmt.Errorf("hook --server: %v: %s", err, out)
		}
		return nil
	}
	endpoint := "http://avfs/v1/hooks/claude-code?" + url.Values{"vault": {"hooked"}, "project": {project}}.Encode()
	httpHook := func() error {
		resp, err := client.Post(endpoint, "application/json", bytes.NewReader(payload))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"permissionDecision":"allow"`)) {
			return fmt.Errorf("POST /v1/hooks/claude-code: HTTP %d: %s", resp.StatusCode, b)
		}
		return nil
	}
	rows := []struct {
		label, target string
		f             func() error
	}{
		{"`avfs hook claude-code` (allow, rewritten)", "< 30 ms", hook},
		{"`avfs hook claude-code --server SOCK` (decided by avfs serve)", "reference", served},
		{"`POST /v1/hooks/claude-code` to avfs serve (an HTTP hook's request, a new connection)", "reference", httpHook},
		{"`avfs --help` (process start)", "reference", help},
	}
	fs := make([]func() error, len(rows))
	for i, r := range rows {
		fs[i] = r.f
	}
	times, err := timeInTurns(n, fs...)
	if err != nil {
		return nil, err
	}
	for i, r := range rows {
		ds := times[i]
		s.Rows = append(s.Rows, []string{r.label, fmtDur(median(ds)), fmtDur(ds[len(ds)*9/10]), r.target})
	}
	s.Notes = append(s.Notes, fmt.Sprintf("Load average when this section ran: %s.", loadAvg()))
	return []section{s}, nil
}

// runBin runs the avfs binary with env and stdin and returns its stdout
// (its stderr too when it fails).
func runBin(ctx context.Context, bin string, env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return append(stdout.Bytes(), stderr.Bytes()...), err
	}
	return stdout.Bytes(), nil
}
