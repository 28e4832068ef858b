// Command avfs is the agent runtime: policy-checked command execution in
// SQLite vaults mounted over FUSE. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"avfs/runner"
)

// startupGCPercent is the GC target of an avfs process unless GOGC says
// otherwise, and startupMemoryLimit the soft limit that bounds it.
//
// Most avfs processes are short: one command parses, compiles the policy
// (tens of thousands of small allocations) and exits. At Go's default of
// 100, collections take about a third of that start (a cold `policy eval`
// measured 30 ms at 100, 21 ms at 400). A higher target lets the heap grow
// four times its live size before collecting; the memory limit makes the
// collector work harder again before a long-running avfs (a mount server)
// grows past it. Cost: at most a few MiB more heap for a one-shot command.
const (
	startupGCPercent   = 400
	startupMemoryLimit = 256 << 20
)

func main() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(startupGCPercent)
		debug.SetMemoryLimit(startupMemoryLimit)
	}
	// SIGINT and SIGTERM cancel ctx with the signal as the cause: a running
	// command is sent the same signal. Later ones are caught and ignored
	// while avfs cleans up.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		cancel(runner.Interrupted{Signal: s.(syscall.Signal)})
	}()
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	signal.Stop(sigs)
	os.Exit(code)
}
