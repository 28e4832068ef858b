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
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/runner"
	"avfs/server"
	"avfs/vault"
	"avfs/wire"
)

// serverFlag is proxy exec's --server.
func serverFlag() cli.Flag {
	return &cli.StringFlag{Name: "server", EnvVars: []string{"AVFS_SERVER"},
		Usage: "run through the avfs serve at `ADDR` (a socket path, unix:PATH, \"default\" for $AVFS_HOME/run/avfs.sock, or tcp:HOST:PORT with the token in $AVFS_TOKEN); in-process when it does not answer"}
}

// tokenEnv is the variable whose value a client of avfs serve sends as
// its bearer token.
const tokenEnv = "AVFS_TOKEN"

// serveSocket is the address --server names: "default" is
// $AVFS_HOME/run/avfs.sock, a unix: prefix is dropped, a relative path is
// made absolute (so that a rewritten command run elsewhere finds it);
// tcp:HOST:PORT stays as it is.
func serveSocket(home, addr string) string {
	if addr == "default" {
		return defaultSocket(home)
	}
	if strings.HasPrefix(addr, "tcp:") {
		return addr
	}
	addr = strings.TrimPrefix(addr, "unix:")
	if abs, err := filepath.Abs(addr); err == nil {
		addr = abs
	}
	return addr
}

// serveClient is an HTTP client of the avfs serve at addr (a socket
// path, or tcp:HOST:PORT); dialed, when not nil, is set once a connection
// is made.
func serveClient(addr string, dialed *atomic.Bool) *http.Client {
	network := "unix"
	if a, ok := strings.CutPrefix(addr, "tcp:"); ok {
		network, addr = "tcp", a
	}
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, network, addr)
		if err == nil && dialed != nil {
			dialed.Store(true)
		}
		return c, err
	}}}
}

// serveRequest is a POST of body to path of avfs serve, with the bearer
// token of $AVFS_TOKEN when it is set.
func serveRequest(ctx context.Context, path string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://avfs"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if tok := strings.TrimSpace(os.Getenv(tokenEnv)); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// serverPrecheck asks the avfs serve at addr (a socket path, or
// tcp:HOST:PORT) for the precheck of req (POST /v1/precheck). ok is false
// when the daemon does not answer, or has no such endpoint: the caller
// decides in-process (note says why). An error document the daemon
// answers (a wrong token included) is err: the daemon decided that the
// run cannot be decided, and the caller fails closed.
func serverPrecheck(ctx context.Context, addr string, req runner.Request) (res wire.PrecheckResult, ok bool, note string, err error) {
	ms := func(d time.Duration) *int64 { n := d.Milliseconds(); return &n }
	var host []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AVFS_APPROVER_") && !strings.HasPrefix(kv, tokenEnv+"=") { // secrets stay here
			host = append(host, kv)
		}
	}
	body, err := json.Marshal(wire.ExecRequest{Argv: req.Argv, Shell: req.Shell, Cwd: req.Cwd, Vault: req.Vault,
		TimeoutMS: ms(req.Timeout), ApprovalTTLMS: ms(req.ApprovalTTL), Env: req.Env, Sandbox: req.Sandbox, HostEnv: host})
	if err != nil {
		return res, false, "", err
	}
	hreq, err := serveRequest(ctx, "/v1/precheck", body)
	if err != nil {
		return res, false, "", err
	}
	resp, err := serveClient(addr, nil).Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return res, false, "", err
		}
		return res, false, fmt.Sprintf("avfs serve at %s is not answering (%v)", addr, err), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return res, false, "", fmt.Errorf("avfs serve at %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var doc struct {
			Error *struct {
				Code    wire.Code `json:"code"`
				Message string    `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &doc) != nil || doc.Error == nil {
			return res, false, "", fmt.Errorf("avfs serve at %s answered HTTP %d", addr, resp.StatusCode)
		}
		if resp.StatusCode == http.StatusNotFound && doc.Error.Code == wire.CodeNotFound { // a daemon without /v1/precheck
			return res, false, fmt.Sprintf("avfs serve at %s has no /v1/precheck", addr), nil
		}
		return res, false, "", wire.Errorf(doc.Error.Code, "avfs serve: %s", doc.Error.Message)
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Kind != wire.PrecheckKind {
		return res, false, "", fmt.Errorf("avfs serve at %s: not a precheck answer: %s", addr, b)
	}
	return res, true, "", nil
}

// serverExec runs req through the avfs serve at the socket addr ("" for
// none; see execServer) and returns its envelope and exit status. It returns
// ok false when none is named, and when the daemon cannot take the run
// (it does not answer, or the run needs what only an in-process run has:
// --stdin, --stream, bundle flags); then the run is the caller's, said on
// stderr. A run the daemon started is never run again here.
func (e *env) serverExec(c *cli.Context, req runner.Request, addr string) (env *wire.Envelope, status int, ok bool) {
	if addr == "" {
		return nil, 0, false
	}
	for _, f := range []string{"stdin", "stream", "bundle", "verification-key", "no-default-bundle"} {
		if c.IsSet(f) {
			fmt.Fprintf(e.stderr, "avfs: --%s is not passed to avfs serve: running in-process\n", f)
			return nil, 0, false
		}
	}
	env, status, note := postExec(c.Context, addr, req)
	if note != "" {
		fmt.Fprintf(e.stderr, "avfs: %s: running in-process\n", note)
		return nil, 0, false
	}
	return env, status, true
}

// serverRestore asks the avfs serve at addr to restore a checkpoint (POST
// /v1/restore). An error document it answers is its error; one that does
// not answer is vault_busy (it holds the vault, or did).
func serverRestore(ctx context.Context, addr string, in wire.RestoreRequest) (vault.RestoreResult, error) {
	var res vault.RestoreResult
	err := postServer(ctx, addr, "/v1/restore", "restore", in, &res)
	return res, err
}

// serverSettle asks the avfs serve at addr to settle a decided approval
// of held or previewed changes (POST /v1/approvals/settle), as
// serverRestore asks a restore.
func serverSettle(ctx context.Context, addr string, in wire.SettleRequest) (wire.SettleResult, error) {
	var res wire.SettleResult
	err := postServer(ctx, addr, "/v1/approvals/settle", "settle approval", in, &res)
	return res, err
}

// postServer posts in to path of the avfs serve at addr and reads its
// answer into out; op names the operation in errors. An error document it
// answers is its error; one that does not answer is vault_busy (it holds
// the vault, or did).
func postServer(ctx context.Context, addr, path, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://avfs"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := serveClient(addr, nil).Do(hreq)
	if err != nil {
		return wire.Errorf(wire.CodeVaultBusy, "%s: the avfs that serves the vault at %s is not answering: %v", op, addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "%s: avfs serve at %s: %v", op, addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var doc wire.ErrorDocument
		if json.Unmarshal(b, &doc) == nil && doc.Error != nil {
			return errorFromDocument(doc, op)
		}
		return fmt.Errorf("%s: avfs serve at %s answered HTTP %d", op, addr, resp.StatusCode)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: avfs serve at %s: not an answer: %v", op, addr, err)
	}
	return nil
}

// postExec runs req through the avfs serve at addr (POST /v1/exec) and
// returns its envelope and exit status. note, when not "", says why the
// daemon did not take the run (it does not answer, or refused the
// request): nothing ran, and the caller may run it elsewhere. Once
// connected, the run is the daemon's: an answer that does not come is an
// envelope of avfs's failure, never a note. Cancelling ctx ends the
// daemon's run.
func postExec(ctx context.Context, addr string, req runner.Request) (env *wire.Envelope, status int, note string) {
	ms := func(d time.Duration) *int64 { n := d.Milliseconds(); return &n }
	maxChanges := max(req.MaxChanges, 0) // -1 (all) is 0 on the wire
	var host []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AVFS_APPROVER_") && !strings.HasPrefix(kv, tokenEnv+"=") { // secrets stay here
			host = append(host, kv)
		}
	}
	body, err := json.Marshal(wire.ExecRequest{Argv: req.Argv, Shell: req.Shell, Cwd: req.Cwd, Vault: req.Vault,
		TimeoutMS: ms(req.Timeout), KillGraceMS: ms(req.KillGrace), MaxOutput: req.MaxOutput, MaxChanges: &maxChanges,
		Env: req.Env, Mountpoint: req.Mountpoint, MountMode: req.MountMode, ApprovalID: req.ApprovalID, ApprovalTTLMS: ms(req.ApprovalTTL),
		RollbackOnFailure: req.RollbackOnFailure, WaitMS: ms(req.BusyWait), Explain: req.Explain, Readonly: req.Readonly,
		Sandbox: req.Sandbox, AllowWritableTrust: req.AllowWritableTrust, HostEnv: host})
	if err != nil {
		return nil, 0, err.Error()
	}
	var dialed atomic.Bool // once connected, the daemon may have started the run
	client := serveClient(addr, &dialed)
	hreq, err := serveRequest(ctx, "/v1/exec", body)
	if err != nil {
		return nil, 0, err.Error()
	}
	resp, err := client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil { // interrupted while the daemon ran it: the daemon's run is ended
			env, status := runner.Failed(req, time.Now(), wire.Errorf(wire.CodeInternal, "proxy exec: interrupted while avfs serve ran the command"))
			return env, status, ""
		}
		if dialed.Load() { // the daemon took the request and went away: it may have run
			env, status := runner.Failed(req, time.Now(), wire.Errorf(wire.CodeInternal, "proxy exec: avfs serve at %s ended before it answered (%v): the command may have run", addr, err))
			return env, status, ""
		}
		return nil, 0, fmt.Sprintf("avfs serve at %s is not answering (%v)", addr, err)
	}
	defer resp.Body.Close()
	status, serr := strconv.Atoi(resp.Header.Get(server.ExitStatusHeader))
	env = &wire.Envelope{}
	if derr := json.NewDecoder(resp.Body).Decode(env); resp.StatusCode != http.StatusOK || serr != nil || derr != nil {
		return nil, 0, fmt.Sprintf("avfs serve at %s did not take the run (HTTP %d)", addr, resp.StatusCode)
	}
	return env, status, ""
}
