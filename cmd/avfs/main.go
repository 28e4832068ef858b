// Command avfs is the agent runtime: policy-checked command execution in
// SQLite vaults mounted over FUSE. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"avfs/runner"
)

func main() {
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
