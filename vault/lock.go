package vault

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"avfs/wire"
)

// LockMount is the lock a writer mount holds.
const LockMount = "mount"

// LockRun is the lock a run that may change the vault holds (the runner's
// exec lock), from before its checkpoint and mark until after its change
// summary, its info the run's id. Marks are taken only under it: while no
// live process holds it, every mark is one a killed run left.
const LockRun = "exec"

// Holder describes who holds a lock.
type Holder struct {
	Name  string    `json:"name"`
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
	Info  string    `json:"info"`
}

// hostname is this machine's name, read once.
var hostname = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

// mounted holds the paths of the vaults whose mount lock this process
// holds: their tree changes come from this process's mount (or its
// materialised copy) and need no look at the locks table.
var mounted sync.Map

func mountedHere(path string) bool {
	_, ok := mounted.Load(path)
	return ok
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
// process is taken over. While a process holds LockMount, no other process
// may change the vault's tree: its kernel caches, or the copy it syncs
// back, would not know of the change.
func (v *Vault) Lock(ctx context.Context, name, info string) error {
	err := v.lock(ctx, name, info)
	if err == nil && name == LockMount {
		mounted.Store(v.path, struct{}{})
	}
	return err
}

func (v *Vault) lock(ctx context.Context, name, info string) error {
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
		if name == LockMount {
			// A killed writer mount's staged chunks are no longer anyone's.
			if _, err := t.sweepStaged(); err != nil {
				return err
			}
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
	if name == LockMount {
		mounted.Delete(v.path)
	}
	return v.update(ctx, "unlock vault", func(t *txn) error {
		r, err := t.tx.ExecContext(ctx, "DELETE FROM locks WHERE name = ? AND pid = ? AND host = ?", name, os.Getpid(), hostname())
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n > 0 {
			t.audit("unlock", "/", map[string]any{"lock": name})
		}
		if name == LockMount {
			// The mount went: what it staged and did not commit is lost
			// with its unflushed writes (see StageChunks).
			if err := t.releaseProcessStaged(); err != nil {
				return err
			}
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
// vault mounted for writing (or materialised by a run).
func refuseIfMounted(t *txn, what string) error {
	h, err := lockHolder(t.ctx, t.tx, LockMount)
	if err != nil || h == nil || (h.PID == os.Getpid() && h.Host == hostname()) || !h.alive() {
		return err
	}
	return wire.Errorf(wire.CodeVaultBusy, "%s: the vault is mounted for writing by pid %d at %s; change it through the mount, or unmount it first", what, h.PID, h.Info).
		With("holder_pid", h.PID).With("holder", h.Name)
}

// claimForDelete fails with vault_busy while a live process other than
// this one holds any lock of the vault (a writer mount, a run), and else
// takes LockMount, so that none starts before the file is gone.
func (v *Vault) claimForDelete(ctx context.Context) error {
	return v.update(ctx, "lock vault", func(t *txn) error {
		holders, err := lockHolders(ctx, t.tx)
		if err != nil {
			return err
		}
		for _, h := range holders {
			if h.alive() && !(h.PID == os.Getpid() && h.Host == hostname()) {
				return wire.Errorf(wire.CodeVaultBusy, "the vault is in use: %s lock held by pid %d on %s since %s (%s)",
					h.Name, h.PID, h.Host, h.Since.Format(time.RFC3339), h.Info).With("holder_pid", h.PID).With("holder", h.Name)
			}
		}
		_, err = t.tx.ExecContext(ctx, "INSERT OR REPLACE INTO locks (name, pid, host, since_ns, info) VALUES (?, ?, ?, ?, ?)",
			LockMount, os.Getpid(), hostname(), t.now, "delete")
		return err
	})
}

// lockHolders returns every row of the locks table, live holders or not.
func lockHolders(ctx context.Context, q querier) ([]Holder, error) {
	rows, err := q.QueryContext(ctx, "SELECT name, pid, host, since_ns, info FROM locks")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hs []Holder
	for rows.Next() {
		var h Holder
		var ns int64
		if err := rows.Scan(&h.Name, &h.PID, &h.Host, &ns, &h.Info); err != nil {
			return nil, err
		}
		h.Since = time.Unix(0, ns)
		hs = append(hs, h)
	}
	return hs, rows.Err()
}
