package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"avfs/runner"
	"avfs/server"
	"avfs/wire"
)

// serverFlag is proxy exec's --server.
func serverFlag() cli.Flag {
	return &cli.StringFlag{Name: "server", EnvVars: []string{"AVFS_SERVER"},
		Usage: "run through the avfs serve at `SOCKET` (a path, unix:PATH, or \"default\" for $AVFS_HOME/run/avfs.sock); in-process when it does not answer"}
}

// serverExec runs req through the avfs serve that --server (or
// AVFS_SERVER) names and returns its envelope and exit status. It returns
// ok false when none is named, and when the daemon cannot take the run
// (it does not answer, or the run needs what only an in-process run has:
// --stdin, --stream, bundle flags); then the run is the caller's, said on
// stderr. A run the daemon started is never run again here.
func (e *env) serverExec(c *cli.Context, req runner.Request) (env *wire.Envelope, status int, ok bool) {
	addr := c.String("server")
	if addr == "" {
		return nil, 0, false
	}
	if addr == "default" {
		addr = defaultSocket(e.home)
	}
	addr = strings.TrimPrefix(addr, "unix:")
	for _, f := range []string{"stdin", "stream", "bundle", "verification-key", "no-default-bundle"} {
		if c.IsSet(f) {
			fmt.Fprintf(e.stderr, "avfs: --%s is not passed to avfs serve: running in-process\n", f)
			return nil, 0, false
		}
	}
	ms := func(d time.Duration) *int64 { n := d.Milliseconds(); return &n }
	maxChanges := max(req.MaxChanges, 0) // -1 (all) is 0 on the wire
	var host []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AVFS_APPROVER_") {
			host = append(host, kv)
		}
	}
	body, err := json.Marshal(wire.ExecRequest{Argv: req.Argv, Shell: req.Shell, Cwd: req.Cwd, Vault: req.Vault,
		TimeoutMS: ms(req.Timeout), KillGraceMS: ms(req.KillGrace), MaxOutput: req.MaxOutput, MaxChanges: &maxChanges,
		Env: req.Env, Mountpoint: req.Mountpoint, MountMode: req.MountMode, ApprovalID: req.ApprovalID, ApprovalTTLMS: ms(req.ApprovalTTL),
		RollbackOnFailure: req.RollbackOnFailure, WaitMS: ms(req.BusyWait), Explain: req.Explain, Readonly: req.Readonly,
		Sandbox: req.Sandbox, AllowWritableTrust: req.AllowWritableTrust, HostEnv: host})
	if err != nil {
		return nil, 0, false
	}
	var dialed atomic.Bool // once connected, the daemon may have started the run
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "unix", addr)
		if err == nil {
			dialed.Store(true)
		}
		return c, err
	}}}
	hreq, err := http.NewRequestWithContext(c.Context, http.MethodPost, "http://avfs/v1/exec", bytes.NewReader(body))
	if err != nil {
		return nil, 0, false
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		if c.Context.Err() != nil { // interrupted while the daemon ran it: the daemon's run is ended
			env, status := runner.Failed(req, time.Now(), wire.Errorf(wire.CodeInternal, "proxy exec: interrupted while avfs serve ran the command"))
			return env, status, true
		}
		if dialed.Load() { // the daemon took the request and went away: it may have run
			env, status := runner.Failed(req, time.Now(), wire.Errorf(wire.CodeInternal, "proxy exec: avfs serve at %s ended before it answered (%v): the command may have run", addr, err))
			return env, status, true
		}
		fmt.Fprintf(e.stderr, "avfs: avfs serve at %s is not answering (%v): running in-process\n", addr, err)
		return nil, 0, false
	}
	defer resp.Body.Close()
	status, serr := strconv.Atoi(resp.Header.Get(server.ExitStatusHeader))
	env = &wire.Envelope{}
	if derr := json.NewDecoder(resp.Body).Decode(env); resp.StatusCode != http.StatusOK || serr != nil || derr != nil {
		fmt.Fprintf(e.stderr, "avfs: avfs serve at %s did not take the run (HTTP %d): running in-process\n", addr, resp.StatusCode)
		return nil, 0, false
	}
	return env, status, true
}
