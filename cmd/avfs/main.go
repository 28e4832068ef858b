// Command avfs is the agent runtime: policy-checked command execution in
// SQLite vaults mounted over FUSE. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
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

// minProcs is the fewest Ps (GOMAXPROCS) an avfs process runs with unless
// GOMAXPROCS says otherwise.
//
// avfs serves the vault's FUSE mount from the same process that waits for
// the sandbox and the command. A FUSE request wakes a reader goroutine
// whose thread was blocked in read(2); with as many Ps as CPUs on a small
// machine (two here), all of them can be held by other goroutines when it
// returns, and it waits for the runtime to take one back — 10 to 20 ms,
// which the sandbox's set-up (it binds the mount) and every file access of
// the command pay. Measured on two CPUs: `timing.sandbox_ms` 15 ms at 2 Ps,
// 4 ms at 4; `proxy exec -- true` 47 ms, then 38 ms. More Ps than CPUs
// cost nothing here: the OS shares the CPUs among the threads.
const minProcs = 4

func main() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(startupGCPercent)
		debug.SetMemoryLimit(startupMemoryLimit)
	}
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
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

// streamingGC sets Go's default GC target (100) back for a command that
// streams data through the heap, unless GOGC or GOMEMLIMIT says otherwise.
// `avfs cat` makes garbage as fast as it reads (the SQLite driver returns
// each chunk in a new allocation): at startupGCPercent the heap grew to
// five times its few live MiB, about 20 MiB more at its peak, for no time
// saved. Measured on a 256 MiB file: peak RSS 57–75 MiB at 400, 48 at 100.
func streamingGC() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(100)
	}
}
