package vault

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"syscall"
	"time"

	"avfs/wire"
)

// LockMount is the lock a writer mount holds.
const LockMount = "mount"

// Holder describes who holds a lock.
type Holder struct {
	Name  string    `json:"name"`
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
	Info  string    `json:"info"`
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// alive reports whether the holder's process still runs. A holder on
// another host is assumed alive.
func (h Holder) alive() bool {
	if h.Host != hostname() {
		return true
	}
	err := syscall.Kill(h.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func lockHolder(ctx context.Context, q querier, name string) (*Holder, error) {
	var h Holder
	var ns int64
	err := q.QueryRowContext(ctx, "SELECT name, pid, host, since_ns, info FROM locks WHERE name = ?", name).Scan(&h.Name, &h.PID, &h.Host, &ns, &h.Info)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.Since = time.Unix(0, ns)
	return &h, nil
}

// Lock takes the named lock for this process. A lock held by a live
// process fails with vault_busy naming the holder; one left by a dead
// process is taken over.
func (v *Vault) Lock(ctx context.Context, name, info string) error {
	return v.update(ctx, "lock vault", func(t *txn) error {
		h, err := lockHolder(ctx, t.tx, name)
		if err != nil {
			return err
		}
		if h != nil && h.alive() && !(h.PID == os.Getpid() && h.Host == hostname()) {
			return wire.Errorf(wire.CodeVaultBusy, "vault is held by %s (pid %d on %s since %s)", h.Name, h.PID, h.Host, h.Since.Format(time.RFC3339)).
				With("holder_pid", h.PID).With("holder", h.Name)
		}
		if _, err := t.tx.ExecContext(ctx, "INSERT OR REPLACE INTO locks (name, pid, host, since_ns, info) VALUES (?, ?, ?, ?, ?)",
			name, os.Getpid(), hostname(), t.now, info); err != nil {
			return err
		}
		details := map[string]any{"lock": name, "pid": os.Getpid()}
		if h != nil && !h.alive() {
			details["stale_pid"] = h.PID
		}
		t.audit("lock", "/", details)
		return nil
	})
}

// Unlock releases the named lock if this process holds it.
func (v *Vault) Unlock(ctx context.Context, name string) error {
	return v.update(ctx, "unlock vault", func(t *txn) error {
		r, err := t.tx.ExecContext(ctx, "DELETE FROM locks WHERE name = ? AND pid = ? AND host = ?", name, os.Getpid(), hostname())
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n > 0 {
			t.audit("unlock", "/", map[string]any{"lock": name})
		}
		return nil
	})
}

// LockHolder returns who holds the named lock, or nil when nobody live does.
func (v *Vault) LockHolder(ctx context.Context, name string) (*Holder, error) {
	h, err := lockHolder(ctx, v.r, name)
	if err != nil {
		return nil, storageErr("read lock", err)
	}
	if h == nil || !h.alive() {
		return nil, nil
	}
	return h, nil
}

// refuseIfMounted fails with vault_busy when another live process has the
// vault mounted for writing.
func refuseIfMounted(t *txn, what string) error {
	h, err := lockHolder(t.ctx, t.tx, LockMount)
	if err != nil || h == nil || !h.alive() || (h.PID == os.Getpid() && h.Host == hostname()) {
		return err
	}
	return wire.Errorf(wire.CodeVaultBusy, "%s: the vault is mounted by pid %d; unmount it first", what, h.PID).With("holder_pid", h.PID)
}
