package vault

/*
typedef struct sqlite3 sqlite3;
extern int sqlite3_db_config(sqlite3 *, int op, ...);

// avfs_no_ckpt_on_close sets SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE (1006) on
// db, and reads it back: 0 when it is on.
static int avfs_no_ckpt_on_close(void *db) {
	int on = -1;
	int rc = sqlite3_db_config((sqlite3 *)db, 1006, 1, &on);
	if (rc != 0) {
		return rc;
	}
	return on == 1 ? 0 : -1;
}
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"avfs/wire"
)

// A replicated vault: its write-ahead log belongs to the replicator.
//
// Why: a replicator (Litestream, package replicate) copies each commit
// out of the vault's log (path-wal) before the log's pages are copied back
// into the file and the log restarts. It keeps a read transaction open so
// that no checkpoint restarts the log behind it, and runs its own
// checkpoints once it has copied the frames. Any checkpoint avfs ran on top
// — the background checkpointer, the inline automatic one at
// walAutoCheckpointBytes, the one SQLite runs when the last connection
// closes, gc's TRUNCATE — races it: when the replicator is not running (a
// host without serve, a crash), the log is copied back and restarted
// without it, and it must then upload a whole new snapshot of the vault
// instead of the frames it missed.
//
// The fix: the mark, a file beside the vault (path + "-replica",
// ReplicaMarkPath) that holds the replica's URL. Its existence is the mark:
// every opener looks for it when it opens the vault (one stat), and a
// marked vault's connections never checkpoint on close
// (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE), checkpoint inline only at
// walReplicatedBoundBytes, and the Vault starts no background checkpointer
// and skips gc's checkpoints. The mark lives outside the vault's tables on
// purpose: a copy of the file (a fork, a restore elsewhere) is not
// replicated, and nothing a command writes into the vault can set, clear
// or redirect it (the URL is trusted configuration, as the config file
// is).
//
// Cost: the log of a marked vault holds what the replicator has not
// checkpointed yet (Litestream: about 4 MiB); with no replicator running
// it grows to walReplicatedBoundBytes (256 MiB) before avfs checkpoints
// all the same, and the replicator then re-snapshots. A process that had
// the vault open before the mark was set keeps its settings until it
// closes it; the replicator's read transaction keeps such a process's
// checkpoints from restarting the log meanwhile.
//
// Invariant: avfs never checkpoints a marked vault's log below
// walReplicatedBoundBytes; the log never grows past it without bound.

// walReplicatedBoundBytes is the log size at which a marked vault's writer
// checkpoints inline all the same: the bound on the log, and on the disk
// it takes, while no replicator runs.
const walReplicatedBoundBytes = 256 << 20

// replicatedBound is walReplicatedBoundBytes, which a test lowers.
var replicatedBound atomic.Int64

func init() { replicatedBound.Store(walReplicatedBoundBytes) }

// ReplicaMark is the content of a vault's replica mark.
type ReplicaMark struct {
	// URL is where the vault is replicated (replicate.ParseURL), without
	// credentials.
	URL string `json:"url"`
	// Since is when the mark was set.
	Since time.Time `json:"since"`
}

// ReplicaMarkPath is the replica mark of the vault file at path.
func ReplicaMarkPath(path string) string { return path + "-replica" }

// replicaMarked says whether the vault file at path carries the mark. A
// mark that cannot be stat'ed for another reason than its absence counts
// as set: avfs then leaves the log alone rather than race a replicator.
func replicaMarked(path string) bool {
	_, err := os.Lstat(ReplicaMarkPath(path))
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// Replicated says whether this Vault was opened with the replica mark
// set: its log is the replicator's (see the head of replica.go).
func (v *Vault) Replicated() bool { return v.replicated }

// ReadReplicaMark returns the mark of the vault file at path; ok is false
// when there is none. A mark that cannot be read or parsed is invalid_input
// naming the file.
func ReadReplicaMark(path string) (m ReplicaMark, ok bool, err error) {
	p := ReplicaMarkPath(path)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, wire.Errorf(wire.CodeHostIO, "read replica mark %s: %w", p, err).With("path", p)
	}
	if err := json.Unmarshal(b, &m); err != nil || m.URL == "" {
		return m, false, wire.Errorf(wire.CodeInvalidInput, "replica mark %s is damaged (%v): `avfs vault replicate NAME --stop` removes it", p, err).With("path", p)
	}
	return m, true, nil
}

// SetReplicaMark marks the vault called name as replicated to url
// (written whole, then renamed into place, mode 0600). It fails with
// vault_not_found when there is no such vault. Processes that have the
// vault open keep their settings until they close it (see the head of
// replica.go).
func (s *Store) SetReplicaMark(ctx context.Context, name, url string) (ReplicaMark, error) {
	if err := ValidName(name); err != nil {
		return ReplicaMark{}, err
	}
	path := s.PathOf(name)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return ReplicaMark{}, wire.Errorf(wire.CodeVaultNotFound, "replicate: no vault %q", name).With("vault", name)
	}
	m := ReplicaMark{URL: url, Since: time.Now().UTC().Truncate(time.Second)}
	b, _ := json.Marshal(m)
	tmp := ReplicaMarkPath(path) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return m, wire.Errorf(wire.CodeHostIO, "replicate: write replica mark: %w", err)
	}
	if err := os.Rename(tmp, ReplicaMarkPath(path)); err != nil {
		os.Remove(tmp)
		return m, wire.Errorf(wire.CodeHostIO, "replicate: write replica mark: %w", err)
	}
	return m, nil
}

// ClearReplicaMark removes the mark of the vault called name: avfs
// checkpoints its log again from the next open, and a replicator running
// for it stops (it watches the mark). It is not an error when there is
// none. The replicator's local state stays until RemoveReplicaState.
func (s *Store) ClearReplicaMark(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := os.Remove(ReplicaMarkPath(s.PathOf(name))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return wire.Errorf(wire.CodeHostIO, "stop replicating %q: %w", name, err)
	}
	return nil
}

// RemoveReplicaState removes the replicator's local state of the vault
// called name (LitestreamDir and ReplicatorLockPath). Call it once no
// replicator runs for the vault (it holds ReplicatorLockPath).
func (s *Store) RemoveReplicaState(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	path := s.PathOf(name)
	if err := os.RemoveAll(LitestreamDir(path)); err != nil {
		return wire.Errorf(wire.CodeHostIO, "stop replicating %q: %w", name, err)
	}
	if err := os.Remove(ReplicatorLockPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return wire.Errorf(wire.CodeHostIO, "stop replicating %q: %w", name, err)
	}
	return nil
}

// ReplicatorLockPath is the file a replicator of the vault file at path
// holds an exclusive flock on while it runs: one replicator per vault.
func ReplicatorLockPath(path string) string { return LitestreamDir(path) + ".lock" }

// Replicas returns the marks of the store's vaults that carry one, by
// vault name. A damaged mark is returned as an error for that name.
func (s *Store) Replicas() (map[string]ReplicaMark, map[string]error, error) {
	names, err := s.Names()
	if err != nil {
		return nil, nil, err
	}
	marks, bad := map[string]ReplicaMark{}, map[string]error{}
	for _, n := range names {
		m, ok, err := ReadReplicaMark(s.PathOf(n))
		switch {
		case err != nil:
			bad[n] = err
		case ok:
			marks[n] = m
		}
	}
	return marks, bad, nil
}

// LitestreamDir is where Litestream keeps its local state of the vault
// file at path (the LTX files not yet uploaded, its position): the
// directory ".<file>-litestream" beside it, Litestream's own choice.
func LitestreamDir(path string) string {
	dir, file := filepath.Split(path)
	return filepath.Join(dir, "."+file+"-litestream")
}

// noCheckpointOnClose makes c never checkpoint the log when it is the
// last connection to the vault to close (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE).
//
// go-sqlite3 exposes no sqlite3_db_config, nor the connection's handle:
// the handle is read from its unexported field db by reflection. The
// go-sqlite3 version is pinned in go.mod, and a change of the field fails
// every open of a replicated vault with an internal error here, never
// silently (TestReplicatedVaultNotCheckpointed).
func noCheckpointOnClose(c *sqlite3.SQLiteConn) error {
	f := reflect.ValueOf(c).Elem().FieldByName("db")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return wire.Errorf(wire.CodeInternal, "open replicated vault: go-sqlite3's connection has no handle field (its version changed?)")
	}
	if rc := C.avfs_no_ckpt_on_close(f.UnsafePointer()); rc != 0 {
		return wire.Errorf(wire.CodeInternal, "open replicated vault: SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE: error %d", int(rc))
	}
	return nil
}

// replicatedConnectHook is the settings of a marked vault's connection
// beyond the ordinary ones: no checkpoint on close, inline checkpoints
// only at walReplicatedBoundBytes.
func replicatedConnectHook(c *sqlite3.SQLiteConn) error {
	if err := noCheckpointOnClose(c); err != nil {
		return err
	}
	_, err := c.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", autoCheckpointPages(replicatedBound.Load(), connPageSize(c))), nil)
	return err
}
