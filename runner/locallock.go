package runner

import (
	"context"
	"os"
	"sync"
	"time"

	"avfs/wire"
)

// The vault's exec lock (vault.Vault.Lock) is held by a process: a second
// run of the same process takes it again at once. A process that runs
// several commands at a time (avfs serve) makes its runs on one vault take
// turns with localLocks, one per vault file, before the vault's lock.
var localLocks sync.Map // vault path -> *localLock

// localLock is the turn of the runs of this process on one vault.
type localLock struct {
	turn   chan struct{} // holds one token while a run has the turn
	mu     sync.Mutex
	holder string // the run's id, for the busy error
}

// takeLocal waits until deadline (or ctx's end) for the turn on the vault
// at path and returns its release. It fails with vault_busy naming the run
// holding it. It never busy-waits: waiters sleep on the turn's channel.
func takeLocal(ctx context.Context, path, id string, deadline time.Time) (func(), error) {
	l, _ := localLocks.LoadOrStore(path, &localLock{turn: make(chan struct{}, 1)})
	ll := l.(*localLock)
	acquired := func() (func(), error) {
		ll.mu.Lock()
		ll.holder = id
		ll.mu.Unlock()
		return func() { <-ll.turn }, nil
	}
	select {
	case ll.turn <- struct{}{}:
		return acquired()
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case ll.turn <- struct{}{}:
		return acquired()
	case <-ctx.Done():
	case <-t.C:
	}
	ll.mu.Lock()
	holder := ll.holder
	ll.mu.Unlock()
	return nil, wire.Errorf(wire.CodeVaultBusy, "vault is held by run %s of this process (pid %d)", holder, os.Getpid()).With("holder", holder)
}
