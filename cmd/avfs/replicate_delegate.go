//go:build !avfs_replicator

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"

	"avfs/wire"
)

func (e *env) replicateAction(ctx context.Context, _ replicateOpts) error { return e.delegate(ctx) }

func (e *env) restoreAction(ctx context.Context, _ restoreOpts) error { return e.delegate(ctx) }

// delegate runs this command line in avfs-replicate (replicate_cli.go),
// with this process's streams and environment, and ends with its exit
// status; SIGINT or SIGTERM here is passed on as SIGTERM (it then ships
// what it has, within 30 s).
func (e *env) delegate(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return wire.Errorf(wire.CodeInternal, "replication: where is avfs: %v", err)
	}
	path := replicatorPath(exe)
	if _, err := os.Stat(path); err != nil {
		return wire.Errorf(wire.CodeInternal, "replication needs avfs-replicate beside avfs (`make build` makes bin/avfs-replicate), or AVFS_REPLICATOR: %v", err).With("path", path)
	}
	cmd := exec.CommandContext(ctx, path, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 40 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	err = cmd.Run()
	e.printed = true // avfs-replicate printed the result, or the error
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if code := ee.ExitCode(); code >= 0 {
			return &exitStatus{code: code}
		}
		return &exitStatus{code: wire.ExitFailure}
	}
	if err != nil {
		e.printed = false
		return wire.Errorf(wire.CodeInternal, "replication: run %s: %v", path, err)
	}
	return nil
}
