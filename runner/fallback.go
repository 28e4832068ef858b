package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"avfs/mount"
	"avfs/vault"
	"avfs/wire"
)

// MountRefusalTTL is how long a process remembers that it may not mount
// FUSE (see fuseState): runs under --mount-mode auto meanwhile materialise
// the vault at once, and the first after it tries to mount again.
const MountRefusalTTL = 5 * time.Minute

// fuseState is what a process knows of its FUSE: how to check and mount
// (mount.Available and mount.Mount; tests fake them), and the last refusal
// of a mount (ErrNotPermitted), remembered for MountRefusalTTL so that a
// long-lived process (avfs serve) does not try and fail on every run. The
// refusal is a property of the process (its capabilities, its container),
// so one fuseState is shared by all Runners of the process
// (processFUSE) unless a test gives its own.
type fuseState struct {
	available func() error
	mount     func(ctx context.Context, store mount.Store, dir string, opts mount.Options) (*mount.Session, error)
	now       func() time.Time

	mu      sync.Mutex
	refusal error
	at      time.Time
}

// processFUSE is the fuseState of the process's Runners.
var processFUSE = &fuseState{available: mount.Available, mount: mount.Mount, now: time.Now}

func (r *Runner) fuse() *fuseState {
	if r.fuseState != nil {
		return r.fuseState
	}
	return processFUSE
}

// refused returns the remembered refusal, and when it was, while it is
// younger than MountRefusalTTL; else nil.
func (f *fuseState) refused() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refusal != nil && f.now().Sub(f.at) >= MountRefusalTTL {
		f.refusal = nil
	}
	return f.at, f.refusal
}

// note remembers the outcome of a mount: a refusal (ErrNotPermitted) from
// now on, a success forgets one; other failures say nothing of it.
func (f *fuseState) note(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		f.refusal = nil
	case errors.Is(err, mount.ErrNotPermitted):
		f.refusal, f.at = err, f.now()
	}
}

// mountFUSE mounts v at dir and remembers whether it was refused.
func (f *fuseState) mountFUSE(ctx context.Context, v *vault.Vault, dir string, opts mount.Options) (*mount.Session, error) {
	s, err := f.mount(ctx, v, dir, opts)
	f.note(err)
	return s, err
}

// choose resolves --mount-mode to fuse or materialize. Under auto it
// takes FUSE unless the process cannot use it (mount.Available) or was
// refused a mount less than MountRefusalTTL ago, and then says why in the
// fallback. fuse is taken as asked: a refusal remembered is tried again
// (the caller asked for FUSE explicitly).
func (f *fuseState) choose(mode string) (string, *wire.MountFallback) {
	if mode != ModeAuto {
		return mode, nil
	}
	if err := f.available(); err != nil {
		return ModeMaterialize, &wire.MountFallback{Reason: wire.FallbackFuseUnavailable, Message: err.Error()}
	}
	if at, err := f.refused(); err != nil {
		return ModeMaterialize, refusedFallback(err, fmt.Sprintf(" (remembered from %s; tried again %s after it)", at.UTC().Format(time.RFC3339), MountRefusalTTL))
	}
	return ModeFUSE, nil
}

// refusedFallback is the fallback of a mount refused with err.
func refusedFallback(err error, more string) *wire.MountFallback {
	return &wire.MountFallback{Reason: wire.FallbackMountNotPermitted, Message: err.Error() + more}
}

// fuseRefusedErr is the error of a --mount-mode fuse run whose mount was
// refused: fuse_unavailable, saying what works instead.
func fuseRefusedErr(err error) error {
	return wire.Errorf(wire.CodeFuseUnavailable,
		"proxy exec: --mount-mode fuse: %w; this process may not mount FUSE here: --mount-mode materialize, or auto (which falls back to it), works", err).
		With("reason", string(wire.FallbackMountNotPermitted))
}
