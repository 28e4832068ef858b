package runner

import (
	"context"
	"os"
	"sync"
	"syscall"
	"time"

	"avfs/vault"
	"avfs/wire"
)

// Defaults of a VaultCache.
const (
	DefaultCachedVaults = 16
	DefaultVaultIdle    = 5 * time.Minute
)

// VaultCache keeps the vaults of a long-lived process (avfs serve) open
// across its runs, so that a run does not pay for opening the vault's
// database (two connection pools, the schema check, the WAL and its shared
// memory) and for closing it (the checkpoint the last close makes).
//
// A cached vault is the file it was opened from: each Open compares the
// file now at the vault's path (device and inode) with the one the cached
// vault has open, and a vault deleted, replaced (renamed over, restored,
// created again) or moved away since is closed once no run uses it and
// opened again from what is there now, or reported missing as Open
// reports it. Nothing else is cached: every decision, lock and change
// still goes to the database, as it does for a vault opened per run.
//
// At most Max vaults no run uses stay open; those unused for Idle are
// closed. Close closes them all (those in use when their run ends). Its
// methods are safe for concurrent use; a vault is closed outside its lock,
// by the call that dropped it.
type VaultCache struct {
	max  int
	idle time.Duration

	mu     sync.Mutex
	open   map[string]*cachedVault // by vault file path
	timer  *time.Timer             // the next idle sweep, while some vault is cached
	closed bool
	doomed []*vault.Vault // dropped and unused: closed by unlock
}

// cachedVault is one open vault of a VaultCache.
type cachedVault struct {
	v     *vault.Vault
	id    fileID    // the file v has open
	refs  int       // runs using it
	used  time.Time // when a run last let go of it
	stale bool      // out of the map: closed when refs drops to 0
}

// fileID identifies a vault file: what a replacement changes.
type fileID struct{ dev, ino uint64 }

func fileIDOf(path string) (fileID, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// NewVaultCache returns a cache that keeps at most max unused vaults open
// (DefaultCachedVaults when max <= 0), each for idle after its last use
// (DefaultVaultIdle when idle <= 0).
func NewVaultCache(max int, idle time.Duration) *VaultCache {
	if max <= 0 {
		max = DefaultCachedVaults
	}
	if idle <= 0 {
		idle = DefaultVaultIdle
	}
	return &VaultCache{max: max, idle: idle, open: map[string]*cachedVault{}}
}

// Open returns the vault called name in store, open, and its release,
// which the caller calls once when done with it (keep false when the run
// failed in a way that may have left the vault's connections unusable: the
// vault is then closed rather than kept). With create, the default vault
// is created when missing (Store.OpenOrCreate); without, a missing vault
// fails as Store.Open does. A nil cache opens and closes the vault per
// call.
func (c *VaultCache) Open(ctx context.Context, store *vault.Store, name string, create bool) (*vault.Vault, func(keep bool), error) {
	openNew := func() (*vault.Vault, error) {
		if create {
			return store.OpenOrCreate(ctx, name)
		}
		return store.Open(ctx, name)
	}
	if c == nil {
		v, err := openNew()
		if err != nil {
			return nil, nil, err
		}
		return v, func(bool) { v.Close() }, nil
	}
	if err := vault.ValidName(name); err != nil {
		return nil, nil, err
	}
	path := store.PathOf(name)
	before, found := fileIDOf(path)
	c.mu.Lock()
	e := c.open[path]
	if e != nil && (!found || e.id != before) { // deleted or replaced since it was opened
		c.drop(path, e)
		e = nil
	}
	if e != nil {
		e.refs++
		c.unlock()
		return e.v, c.releaser(path, e), nil
	}
	c.unlock()

	v, err := openNew()
	if err != nil {
		return nil, nil, err
	}
	// The file opened is the one at path before and after the open (or
	// the one it created): otherwise it is used once, uncached.
	after, ok := fileIDOf(path)
	if !ok || (found && after != before) {
		return v, func(bool) { v.Close() }, nil
	}
	c.mu.Lock()
	defer c.unlock()
	if c.closed || c.open[path] != nil { // closing, or another run opened it meanwhile
		return v, func(bool) { v.Close() }, nil
	}
	e = &cachedVault{v: v, id: after, refs: 1}
	c.open[path] = e
	c.schedule()
	return v, c.releaser(path, e), nil
}

// releaser is the release of one use of e.
func (c *VaultCache) releaser(path string, e *cachedVault) func(keep bool) {
	var once sync.Once
	return func(keep bool) {
		once.Do(func() {
			c.mu.Lock()
			defer c.unlock()
			e.refs--
			e.used = time.Now()
			switch {
			case !e.stale && !keep:
				c.drop(path, e)
			case e.stale && e.refs == 0:
				c.doomed = append(c.doomed, e.v)
			case !e.stale:
				c.trim()
			}
		})
	}
}

// drop takes e out of the cache; it is closed by unlock when no run uses
// it, else by its last release. c.mu is held.
func (c *VaultCache) drop(path string, e *cachedVault) {
	if c.open[path] == e {
		delete(c.open, path)
	}
	e.stale = true
	if e.refs == 0 {
		c.doomed = append(c.doomed, e.v)
	}
}

// unlock releases c.mu, then closes the vaults dropped meanwhile.
func (c *VaultCache) unlock() {
	doomed := c.doomed
	c.doomed = nil
	c.mu.Unlock()
	for _, v := range doomed {
		v.Close()
	}
}

// trim closes the least recently used vaults no run uses while more than
// max are, and those idle for c.idle. c.mu is held.
func (c *VaultCache) trim() {
	now := time.Now()
	for {
		unused := 0
		var oldest string
		for p, e := range c.open {
			if e.refs > 0 {
				continue
			}
			if now.Sub(e.used) >= c.idle {
				c.drop(p, e)
				continue
			}
			unused++
			if oldest == "" || e.used.Before(c.open[oldest].used) {
				oldest = p
			}
		}
		if unused <= c.max || oldest == "" {
			return
		}
		c.drop(oldest, c.open[oldest])
	}
}

// schedule arms the idle sweep. c.mu is held.
func (c *VaultCache) schedule() {
	if c.timer != nil || c.closed {
		return
	}
	c.timer = time.AfterFunc(c.idle, func() {
		c.mu.Lock()
		defer c.unlock()
		c.timer = nil
		c.trim()
		if len(c.open) > 0 {
			c.schedule()
		}
	})
}

// Close closes the cached vaults: those no run uses now, the others when
// their runs let go. Vaults opened through the cache afterwards are not
// kept. It waits for the closes it starts.
func (c *VaultCache) Close() {
	c.mu.Lock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	for p, e := range c.open {
		c.drop(p, e)
	}
	c.unlock()
}

// Len is how many vaults the cache holds open.
func (c *VaultCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// keepVault reports whether a run that ended with failure (nil when it did
// not) leaves its vault fit to keep open: not after a storage failure
// (host I/O, a full disk, damage, an internal error), which a fresh open
// may not share (a vault opened on a full disk is read-only for good).
func keepVault(failure *wire.ErrorBody) bool {
	if failure == nil {
		return true
	}
	switch failure.Code {
	case wire.CodeHostIO, wire.CodeNoSpace, wire.CodeIntegrity, wire.CodeInternal:
		return false
	}
	return true
}
