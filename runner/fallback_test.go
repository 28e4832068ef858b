package runner

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"avfs/mount"
	"avfs/wire"
)

// fakeFUSE is a fuseState whose FUSE is available and whose mounts fail
// with err (counted), on a clock the test moves.
type fakeFUSE struct {
	mu     sync.Mutex
	mounts int
	clock  time.Time
}

func (ff *fakeFUSE) state(err func(dir string) error) *fuseState {
	return &fuseState{
		available: func() error { return nil },
		mount: func(_ context.Context, _ mount.Store, dir string, _ mount.Options) (*mount.Session, error) {
			ff.mu.Lock()
			ff.mounts++
			ff.mu.Unlock()
			return nil, err(dir)
		},
		now: func() time.Time {
			ff.mu.Lock()
			defer ff.mu.Unlock()
			return ff.clock
		},
	}
}

func (ff *fakeFUSE) count() int {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	return ff.mounts
}

func (ff *fakeFUSE) advance(d time.Duration) {
	ff.mu.Lock()
	ff.clock = ff.clock.Add(d)
	ff.mu.Unlock()
}

func refusedEPERM(dir string) error {
	return mount.NotPermitted(dir, &mountError{syscall.EPERM})
}

// mountError is how go-fuse's direct mount fails: mount(2)'s errno.
type mountError struct{ errno syscall.Errno }

func (e *mountError) Error() string { return "mount: " + e.errno.Error() }
func (e *mountError) Unwrap() error { return e.errno }

// Where the mount is refused (EPERM: a container without CAP_SYS_ADMIN),
// auto falls back to a materialised copy, runs, and says why in the
// envelope; the refusal is remembered (no mount is tried) until
// MountRefusalTTL has passed. fuse fails with fuse_unavailable saying
// what works, tries again although the refusal is remembered, and leaves
// no checkpoint.
func TestExecAutoFallsBackWhenMountRefused(t *testing.T) {
	ctx := context.Background()
	r := newTestRunner(t)
	ff := &fakeFUSE{clock: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	r.fuseState = ff.state(refusedEPERM)
	auto := writeRequest()
	auto.MountMode = ModeAuto

	env, status := r.Exec(ctx, auto)
	if status != 0 || env.Error != nil || env.Process == nil || env.Process.ExitCode != 0 {
		t.Fatalf("auto: status %d error %+v", status, env.Error)
	}
	if m := env.Mount; m == nil || m.Mode != "materialized" || m.Fallback == nil || m.Fallback.Reason != wire.FallbackMountNotPermitted ||
		!strings.Contains(m.Fallback.Message, "not permitted") {
		t.Fatalf("auto: mount %+v fallback %+v", env.Mount, env.Mount.Fallback)
	}
	if env.Checkpoint == nil || len(env.Changes) != 1 || env.Changes[0].Path != "/a.txt" {
		t.Fatalf("auto: checkpoint %+v changes %+v", env.Checkpoint, env.Changes)
	}
	if ff.count() != 1 {
		t.Fatalf("auto: %d mounts tried, want 1", ff.count())
	}

	// Remembered: the next run does not try.
	env, status = r.Exec(ctx, auto)
	if status != 0 || env.Mount == nil || env.Mount.Fallback == nil || env.Mount.Fallback.Reason != wire.FallbackMountNotPermitted ||
		!strings.Contains(env.Mount.Fallback.Message, "remembered") || ff.count() != 1 {
		t.Fatalf("auto again: status %d mount %+v, %d mounts tried", status, env.Mount, ff.count())
	}

	// --mount-mode fuse tries, fails typed, and leaves no checkpoint.
	before := len(checkpoints(t, r))
	fuse := writeRequest()
	fuse.MountMode = ModeFUSE
	env, status = r.Exec(ctx, fuse)
	if status != wire.ExitAvfsFailed || env.Error == nil || env.Error.Code != wire.CodeFuseUnavailable ||
		!strings.Contains(env.Error.Message, "not permitted") || !strings.Contains(env.Error.Message, "--mount-mode materialize") ||
		strings.Contains(env.Error.Message, "fusermount exited") {
		t.Fatalf("fuse: status %d error %+v", status, env.Error)
	}
	if env.Error.Details["reason"] != string(wire.FallbackMountNotPermitted) {
		t.Errorf("fuse: details %v", env.Error.Details)
	}
	if ff.count() != 2 || env.Process != nil || env.Checkpoint != nil || len(checkpoints(t, r)) != before {
		t.Fatalf("fuse: %d mounts tried, process %+v, checkpoint %+v, %d checkpoints (had %d)", ff.count(), env.Process, env.Checkpoint, len(checkpoints(t, r)), before)
	}

	// Once MountRefusalTTL has passed, auto tries again.
	ff.advance(MountRefusalTTL)
	if env, status = r.Exec(ctx, auto); status != 0 || env.Mount.Fallback == nil || ff.count() != 3 ||
		strings.Contains(env.Mount.Fallback.Message, "remembered") {
		t.Fatalf("auto after the TTL: status %d fallback %+v, %d mounts tried", status, env.Mount.Fallback, ff.count())
	}
}

// A process that cannot use FUSE at all materialises under auto without
// trying, and says so.
func TestExecAutoFallsBackWithoutFUSE(t *testing.T) {
	r := newTestRunner(t)
	ff := &fakeFUSE{}
	r.fuseState = ff.state(refusedEPERM)
	r.fuseState.available = func() error {
		return wire.Errorf(wire.CodeFuseUnavailable, "FUSE is not available: /dev/fuse does not exist")
	}
	req := writeRequest()
	req.MountMode = ModeAuto
	env, status := r.Exec(context.Background(), req)
	if status != 0 || env.Mount == nil || env.Mount.Mode != "materialized" || env.Mount.Fallback == nil ||
		env.Mount.Fallback.Reason != wire.FallbackFuseUnavailable || ff.count() != 0 {
		t.Fatalf("status %d mount %+v, %d mounts tried", status, env.Mount, ff.count())
	}
	// Asked for, materialize reports no fallback.
	req.MountMode = ModeMaterialize
	if env, _ := r.Exec(context.Background(), req); env.Mount == nil || env.Mount.Fallback != nil {
		t.Fatalf("materialize: mount %+v", env.Mount)
	}
}

// A mount that fails otherwise (not a refusal) is not fallen back from
// nor remembered, and its run leaves no checkpoint.
func TestExecMountFailureIsNotAFallback(t *testing.T) {
	r := newTestRunner(t)
	ff := &fakeFUSE{}
	r.fuseState = ff.state(func(dir string) error {
		return wire.Errorf(wire.CodeMountFailed, "mount %s: the mount was not ready", dir)
	})
	req := writeRequest()
	req.MountMode = ModeAuto
	for i := 1; i <= 2; i++ {
		env, status := r.Exec(context.Background(), req)
		if status != wire.ExitAvfsFailed || env.Error == nil || env.Error.Code != wire.CodeMountFailed || ff.count() != i {
			t.Fatalf("run %d: status %d error %+v, %d mounts tried", i, status, env.Error, ff.count())
		}
		if env.Checkpoint != nil || len(checkpoints(t, r)) != 0 {
			t.Fatalf("run %d: checkpoint %+v left", i, env.Checkpoint)
		}
	}
	if _, err := r.fuseState.refused(); err != nil {
		t.Fatalf("remembered %v", err)
	}
}

// A --cwd that is no directory of the vault fails the run before its
// command starts: the checkpoint it took is removed.
func TestExecBadCwdLeavesNoCheckpoint(t *testing.T) {
	r := newTestRunner(t)
	req := writeRequest()
	if _, status := r.Exec(context.Background(), req); status != 0 {
		t.Fatalf("first run: %d", status)
	}
	before := checkpoints(t, r)
	req.Cwd = "/a.txt"
	env, status := r.Exec(context.Background(), req)
	if status != wire.ExitAvfsFailed || env.Error == nil || env.Error.Code != wire.CodeInvalidInput {
		t.Fatalf("status %d error %+v", status, env.Error)
	}
	if after := checkpoints(t, r); len(after) != len(before) || env.Checkpoint != nil {
		t.Fatalf("checkpoints %d -> %d, envelope's %+v", len(before), len(after), env.Checkpoint)
	}
}
