package vault

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mattn/go-sqlite3"

	"avfs/wire"
)

// sqliteMagic opens every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// unreadable returns the vault_unreadable error for the file at path: its
// message says what the file is ("PATH is empty (0 bytes)"), its details
// name the vault, the path and the reason.
func unreadable(path string, fault wire.VaultFault, format string, args ...any) *wire.Error {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	name := strings.TrimSuffix(filepath.Base(path), fileExt)
	return wire.Errorf(wire.CodeVaultUnreadable, "%s "+format, append([]any{path}, args...)...).
		With("vault", name).With("path", path).With("reason", fault)
}

// checkFile says, from the file's metadata and its first 100 bytes,
// whether the file at path (fi, as os.Stat gives it) cannot be a vault,
// before SQLite touches it: SQLite would block on a FIFO, and opening a
// database that is not in WAL mode with the vault settings would rewrite
// its header. It fails with vault_unreadable (empty, not_regular,
// not_sqlite, damaged, not_avfs, schema_too_new) or host_io; nil means
// that only SQLite can tell. Every vault file avfs makes is a whole number
// of pages in WAL mode, so a good vault always passes. It never writes.
func checkFile(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return unreadable(path, wire.VaultNotRegular, "is not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() == 0 {
		return unreadable(path, wire.VaultEmpty, "is empty (0 bytes)")
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return wire.Errorf(wire.CodeHostIO, "open vault: %w", err)
	}
	defer f.Close()
	var h [100]byte
	n, err := io.ReadFull(f, h[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return wire.Errorf(wire.CodeHostIO, "open vault: %w", err)
	}
	if m := min(n, len(sqliteMagic)); !bytes.Equal(h[:m], []byte(sqliteMagic[:m])) {
		return unreadable(path, wire.VaultNotSQLite, "is not an SQLite database")
	}
	if n < len(h) {
		return unreadable(path, wire.VaultDamaged, "is truncated (%d bytes, less than an SQLite header)", n)
	}
	page := int64(binary.BigEndian.Uint16(h[16:18]))
	if page == 1 {
		page = 65536
	}
	if page < 512 || page&(page-1) != 0 {
		return unreadable(path, wire.VaultDamaged, "is damaged (its header gives a page size of %d)", page)
	}
	if fi.Size()%page != 0 {
		return unreadable(path, wire.VaultDamaged, "is truncated (%d bytes, not a whole number of %d-byte pages)", fi.Size(), page)
	}
	// Out of WAL mode the header is the whole truth; in WAL mode the log
	// may hold a newer one, which only SQLite reads.
	if h[18] != 2 || h[19] != 2 {
		if ver := int32(binary.BigEndian.Uint32(h[60:64])); ver < 1 || ver > schemaVersion {
			return wrongSchema(path, ver)
		}
	}
	return nil
}

// wrongSchema is the vault_unreadable error for a database whose schema
// version (PRAGMA user_version) is not the one this avfs reads.
func wrongSchema(path string, ver int32) error {
	switch {
	case ver > schemaVersion:
		return unreadable(path, wire.VaultSchemaTooNew, "is a vault of a newer avfs (schema version %d; this avfs reads version %d): use that avfs, or upgrade this one", ver, schemaVersion).
			With("schema_version", ver).With("supported_schema_version", schemaVersion)
	case ver == 0:
		return unreadable(path, wire.VaultNotAVFS, "is an SQLite database but not an avfs vault (it has no avfs schema version)").
			With("schema_version", ver).With("supported_schema_version", schemaVersion)
	default:
		return unreadable(path, wire.VaultNotAVFS, "is not an avfs vault this avfs reads (schema version %d; this avfs reads version %d)", ver, schemaVersion).
			With("schema_version", ver).With("supported_schema_version", schemaVersion)
	}
}

// fileFault turns an error SQLite gave while opening or describing the
// vault at path into vault_unreadable when it says that the file is not a
// vault: damaged (corrupt, or truncated at a page boundary) or lacking the
// vault's tables. ok is false, and err returned as it is, for any other
// error (busy, I/O, cancelled).
func fileFault(path string, err error) (_ error, ok bool) {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return err, false
	}
	switch {
	case se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB:
		return unreadable(path, wire.VaultDamaged, "is damaged (%w)", se), true
	case se.Code == sqlite3.ErrError && (strings.Contains(se.Error(), "no such table") || strings.Contains(se.Error(), "no such column")):
		return unreadable(path, wire.VaultNotAVFS, "is an SQLite database but not an avfs vault (%w)", se), true
	}
	return err, false
}

// Listed is one vault of the store as List found it: Info when it could
// be read, else Err.
type Listed struct {
	Name string
	Path string // absolute
	Info *Info
	Err  error
}

// List describes every vault of the store, sorted by name. A vault that
// cannot be read does not hide the others: it is listed with Err, a
// vault_unreadable error (its reason a wire.VaultFault) when its file is
// not a vault this avfs can open, else what reading it failed with
// (host_io, vault_busy). List fails only when the vaults directory cannot
// be read or ctx ends. It changes no file that is not a good vault (a good
// one is opened and closed, as every command does).
func (s *Store) List(ctx context.Context) ([]Listed, error) {
	names, err := s.Names()
	if err != nil {
		return nil, err
	}
	out := make([]Listed, 0, len(names))
	for _, n := range names {
		l := Listed{Name: n, Path: s.PathOf(n)}
		if abs, err := filepath.Abs(l.Path); err == nil {
			l.Path = abs
		}
		v, info, err := s.inspect(ctx, n)
		if err != nil {
			l.Err = err
		} else {
			v.Close()
			l.Info, l.Path = &info, info.Path
		}
		out = append(out, l)
	}
	if err := ctx.Err(); err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "list vaults: %w", err)
	}
	return out, nil
}

// inspect opens the vault called name and describes it. It fails with
// vault_unreadable when the file is not a vault this avfs can read, an
// SQLite file whose vault tables are missing or damaged included.
func (s *Store) inspect(ctx context.Context, name string) (*Vault, Info, error) {
	v, err := s.Open(ctx, name)
	if err != nil {
		return nil, Info{}, err
	}
	info, err := v.Info(ctx)
	if err != nil {
		v.Close()
		err, _ = fileFault(s.PathOf(name), err)
		return nil, Info{}, fmt.Errorf("open vault %q: %w", name, err)
	}
	return v, info, nil
}

// deleteUnreadable removes the vault file path (fi, as os.Lstat gave it),
// which cannot be opened as a vault (ue says why), with its -wal and -shm
// files; it releases the registrations of a fork by that name in the
// other vaults, and the current-vault choice when it was current. It
// fails with vault_busy when a newer avfs records a live holder in the
// file, or when the file changed since fi. Forks that borrow from the
// deleted file lose what they borrow; they could not read it before
// either.
func (s *Store) deleteUnreadable(ctx context.Context, name, path string, fi os.FileInfo, ue *wire.Error) error {
	if ue.Details["reason"] == wire.VaultSchemaTooNew {
		if h := liveHolder(ctx, path, s.Opts); h != nil {
			return wire.Errorf(wire.CodeVaultBusy, "delete vault %q: a newer avfs uses it: %s lock held by pid %d on %s (%s)", name, h.Name, h.PID, h.Host, h.Info).
				With("vault", name).With("holder_pid", h.PID).With("holder", h.Name)
		}
	}
	if err := s.releaseForkName(ctx, name); err != nil {
		return fmt.Errorf("delete vault %q: %w", name, err)
	}
	now, err := os.Lstat(path)
	if err != nil || !os.SameFile(fi, now) {
		return wire.Errorf(wire.CodeVaultBusy, "delete vault %q: %s changed while it was being deleted; nothing was removed, try again", name, path).With("vault", name)
	}
	if err := removeFiles(path); err != nil {
		return wire.Errorf(wire.CodeHostIO, "delete vault %q: %w", name, err)
	}
	if s.Current() == name {
		os.Remove(filepath.Join(s.Dir, "current"))
	}
	return nil
}

// liveHolder returns a live process that the locks table of the vault
// file at path records, read without checking the schema version (a newer
// schema keeps the table); nil when there is none or the table cannot be
// read.
func liveHolder(ctx context.Context, path string, opts Options) *Holder {
	// Only a file in WAL mode: the vault settings would switch another.
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	var h [20]byte
	_, err = io.ReadFull(f, h[:])
	f.Close()
	if err != nil || h[18] != 2 || h[19] != 2 {
		return nil
	}
	v, err := open(path, opts, false)
	if err != nil {
		return nil
	}
	defer v.Close()
	hs, err := lockHolders(ctx, v.rdb)
	if err != nil {
		return nil
	}
	for _, h := range hs {
		if h.alive() && !(h.PID == os.Getpid() && h.Host == hostname()) {
			return &h
		}
	}
	return nil
}

// releaseForkName removes the registrations of a fork called name from
// every other vault that can be read: they pin data for a fork that is
// being deleted without its file saying whose fork it is. A vault that
// cannot be opened is skipped; one that cannot be updated fails it.
func (s *Store) releaseForkName(ctx context.Context, name string) error {
	names, err := s.Names()
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == name {
			continue
		}
		p, err := s.Open(ctx, n)
		if err != nil {
			continue
		}
		var count int
		if err := p.rdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM forks WHERE name = ?", name).Scan(&count); err != nil || count == 0 {
			p.Close()
			continue
		}
		err = p.update(ctx, "release fork", func(t *txn) error {
			if _, err := t.tx.ExecContext(ctx, "DELETE FROM forks WHERE name = ?", name); err != nil {
				return err
			}
			t.audit("vault.fork_released", "/", map[string]any{"fork_name": name})
			return nil
		})
		p.Close()
		if err != nil {
			return fmt.Errorf("release fork %q in vault %q: %w", name, n, err)
		}
	}
	return nil
}
