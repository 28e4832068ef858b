package vault

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"avfs/wire"
)

// Vault is an open vault file. It is safe for concurrent use by several
// goroutines, and several processes may open the same file at once.
type Vault struct {
	path     string
	actor    string
	auditKey []byte  // Options.AuditKey; nil: rows are written without a MAC
	db       *sql.DB // writers: every transaction is BEGIN IMMEDIATE
	rdb      *sql.DB // readers: deferred, query-only transactions
	ws       *stmtCache
	rs       *stmtCache
	r        cq // reads outside a transaction, through cached statements

	// readOnly is set when the vault was opened on a full file system
	// (see openReadOnlyShm): every write fails with no_space.
	readOnly bool
	// replicated is set when the vault carried the replica mark when it
	// was opened: its log is the replicator's (replica.go).
	replicated bool

	mu     sync.Mutex
	parent *Vault // lazily opened parent of a fork (read-only use)
	closed bool
	bg     *retainLoop              // background retention (StartRetention); nil when not started
	ckpt   atomic.Pointer[ckptLoop] // background checkpoints (StartCheckpointer); nil when not started

	retainMu sync.Mutex // one retention pass at a time (RetainIfDue)
	// passHead is 1 + the audit chain's head right after this Vault's
	// last retention pass, or when StartRetention began; 0 before either.
	// Close compares it with the head to skip a final pass over nothing.
	passHead atomic.Int64

	// dirs caches directory paths across transactions; it is valid while
	// the state row's dir_epoch equals dirsEpoch.
	dirsMu    sync.Mutex
	dirs      map[int64]string
	dirsEpoch int64

	// inoMu guards nextIno, the lowest inode number this process has
	// neither allocated nor reserved (see ReserveIno).
	inoMu   sync.Mutex
	nextIno int64
}

// allocIno returns the inode number for a new node, given the state's
// next_ino: never one this process reserved or allocated before.
func (v *Vault) allocIno(next int64) int64 {
	v.inoMu.Lock()
	defer v.inoMu.Unlock()
	ino := max(next, v.nextIno)
	v.nextIno = ino + 1
	return ino
}

// ReserveIno returns an inode number for a node this process creates
// later with NodeSpec.Ino: no node created meanwhile gets it. A writer
// mount uses it to answer a create before committing it (other processes
// cannot change the tree while it holds the vault). A number reserved and
// never used is simply skipped.
func (v *Vault) ReserveIno(ctx context.Context) (uint64, error) {
	var next int64
	err := v.ws.readRow(ctx, v.r, func(r *sql.Row) error { return r.Scan(&next) }, "SELECT next_ino FROM state WHERE id = 1")
	if err != nil {
		return 0, storageErr("reserve inode", err)
	}
	return uint64(v.allocIno(next)), nil
}

// Options tune how a vault is opened.
type Options struct {
	// Actor names who acts, recorded in every audit row
	// (default "user:<login>").
	Actor string
	// AuditKey is the installation's audit key (the CLI keeps 32 random
	// bytes in $AVFS_HOME/keys/audit.key; this package never reads it).
	// With a key, every audit row written carries HMAC-SHA256(AuditKey,
	// hash), in the transaction that writes the row, and VerifyAudit and
	// Check check the MACs of the rows that have one. Without one, rows are
	// written unanchored (no MAC) and MACs are not checked.
	AuditKey []byte
	// PageSize is the SQLite page size of a vault Create or a Store's Fork
	// makes (0: PageSize). Opening an existing vault ignores it.
	PageSize int
}

// Info describes a vault (its JSON is pinned in wire).
type Info = wire.VaultInfo

// ForkPoint is where a fork branched off its parent.
type ForkPoint = wire.VaultForkPoint

// ForkRef is a live fork of a vault.
type ForkRef = wire.VaultForkRef

// driverName is go-sqlite3 with the per-connection settings a vault needs
// beyond what the DSN can say.
const driverName = "avfs-sqlite3"

// writerDriverName is driverName for the connections that write (the
// writer pool, the background checkpointer): the same settings without
// the memory map. A writer reads little but the pages it updates, and a
// mapped page it touched stays in the process's resident memory for as
// long as the file is mapped: with the map, a 1 GiB write through a mount
// left about 40 MB of the vault file resident in the server (132 MB peak,
// against 93 MB without; docs/benchmarks.md).
const writerDriverName = "avfs-sqlite3-writer"

// mmapPragma is the memory map every connection reads the vault file
// through (1 GiB): reads take no copy, but each page read stays in the
// process's resident memory while the file is mapped.
const mmapPragma = "PRAGMA mmap_size = 1073741824"

// cacheSize is every connection's page cache: negative, in KiB (16 MB).
const cacheSize = "-16000"

// replicatedSuffix names the drivers of a vault with the replica mark:
// the same settings, then replicatedConnectHook's.
const replicatedSuffix = "-replicated"

func init() {
	register := func(name, mmap string, replicated bool) {
		sql.Register(name, &sqlite3.SQLiteDriver{
			ConnectHook: func(c *sqlite3.SQLiteConn) error {
				// Shrink the WAL back after checkpoints instead of keeping its
				// largest size; checkpoint inline at walAutoCheckpointBytes
				// of log, whatever the vault's page size.
				_, err := c.Exec(fmt.Sprintf("PRAGMA journal_size_limit = 67108864; PRAGMA wal_autocheckpoint = %d; ", autoCheckpointPages(walAutoCheckpointBytes, connPageSize(c)))+mmap, nil)
				if err == nil && replicated {
					err = replicatedConnectHook(c)
				}
				return err
			},
		})
	}
	register(driverName, mmapPragma, false)
	register(writerDriverName, "PRAGMA mmap_size = 0", false)
	register(driverName+replicatedSuffix, mmapPragma, true)
	register(writerDriverName+replicatedSuffix, "PRAGMA mmap_size = 0", true)
}

// connPageSize is the page size of c's main database, 0 when it cannot be
// read (a new, empty file has none yet either: SQLite then reports 4096).
func connPageSize(c *sqlite3.SQLiteConn) int64 {
	rows, err := c.Query("PRAGMA page_size", nil)
	if err != nil {
		return 0
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if rows.Next(dest) != nil {
		return 0
	}
	n, _ := dest[0].(int64)
	return n
}

func dsn(path string, write bool) string {
	return dsnWith(path, write, false)
}

// dsnWith is dsn; shmReadOnly makes the readers' DSN one that never writes
// the log's shared-memory index (see openReadOnlyShm).
func dsnWith(path string, write, shmReadOnly bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", "30000")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	q.Set("_cache_size", cacheSize)
	q.Set("vfs", walVFS)
	if write {
		// New vaults can give freed pages back to the file system
		// (compactIfSparse); an existing one without it converts at gc's
		// VACUUM.
		q.Set("_auto_vacuum", "incremental")
		q.Set("_txlock", "immediate")
	} else {
		q.Set("_txlock", "deferred")
		q.Set("_query_only", "true")
		if shmReadOnly {
			q.Set("mode", "ro")
			q.Set("readonly_shm", "1")
		}
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

func defaultActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "user:" + u.Username
	}
	return fmt.Sprintf("uid:%d", os.Getuid())
}

// Create makes a new vault file at path named name. It fails with
// already_exists when the file exists.
func Create(ctx context.Context, path, name string, opts Options) (*Vault, error) {
	exists := func() error {
		return wire.Errorf(wire.CodeAlreadyExists, "create vault %q: %s already exists", name, path).With("vault", name)
	}
	if _, err := os.Lstat(path); err == nil {
		return nil, exists()
	}
	pageSize, err := pageSizeOf(opts)
	if err != nil {
		return nil, err
	}
	// The vault is made whole under a name of its own, then linked into
	// place: a process that opens path (two first runs creating the
	// default vault at once) never sees a file without its schema, and
	// link(2) lets exactly one creator win.
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := fmt.Sprintf("%s.creating-%x", path, rnd)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "create vault %q: %w", name, err)
	}
	f.Close()
	defer removeFiles(tmp)
	if err := formatEmpty(ctx, tmp, pageSize); err != nil {
		return nil, err
	}
	v, err := open(tmp, opts, false)
	if err != nil {
		return nil, err
	}
	if err := v.init(ctx, name, "", "", 0); err != nil {
		v.Close()
		return nil, err
	}
	if err := v.Close(); err != nil { // the last close folds the log into the file
		return nil, err
	}
	if fi, err := os.Stat(tmp + "-wal"); err == nil && fi.Size() > 0 {
		return nil, wire.Errorf(wire.CodeInternal, "create vault %q: the new vault's log was not folded into it", name)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, exists()
		}
		return nil, wire.Errorf(wire.CodeHostIO, "create vault %q: %w", name, err)
	}
	return Open(ctx, path, opts)
}

// Open opens an existing vault file. It fails with vault_not_found when
// there is none, and with vault_unreadable (details: reason, a
// wire.VaultFault) when the file cannot be a vault of this avfs: empty,
// not a regular file, a symbolic link to nothing, not SQLite, truncated or
// damaged, an SQLite database of something else, or a vault of a newer
// avfs. It never writes to such a file.
func Open(ctx context.Context, path string, opts Options) (*Vault, error) {
	return openChecked(ctx, path, opts, false)
}

// openWriter opens an existing vault file like Open, for a caller that
// uses only its writer connection: the schema check goes through that one.
func openWriter(ctx context.Context, path string, opts Options) (*Vault, error) {
	return openChecked(ctx, path, opts, true)
}

func openChecked(ctx context.Context, path string, opts Options, writer bool) (*Vault, error) {
	name := strings.TrimSuffix(filepath.Base(path), fileExt)
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&os.ModeSymlink != 0 {
				return nil, fmt.Errorf("open vault %q: %w", name, unreadable(path, wire.VaultDanglingLink, "is a symbolic link to nothing"))
			}
			return nil, wire.Errorf(wire.CodeVaultNotFound, "open vault: no vault %q", name).With("vault", name)
		}
		return nil, wire.Errorf(wire.CodeHostIO, "open vault: %w", err)
	}
	if err := checkFile(path, fi); err != nil {
		return nil, fmt.Errorf("open vault %q: %w", name, err)
	}
	v, err := open(path, opts, false)
	if err != nil {
		return nil, err
	}
	db := v.rdb
	if writer {
		db = v.db
	}
	var ver int32
	err = db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&ver)
	if err != nil && !writer && wire.IsNoSpace(storageErr("open vault", err)) {
		v.Close()
		if v, err = openReadOnlyShm(path, opts); err != nil {
			return nil, err
		}
		err = v.rdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&ver)
	}
	if err != nil {
		v.Close()
		if ferr, ok := fileFault(path, err); ok {
			return nil, fmt.Errorf("open vault %q: %w", name, ferr)
		}
		return nil, storageErr("open vault", err)
	}
	if ver >= 1 && ver < schemaVersion {
		if err := v.migrate(ctx, ver); err != nil {
			v.Close()
			return nil, fmt.Errorf("open vault %q: %w", name, err)
		}
	} else if ver != schemaVersion {
		v.Close()
		return nil, fmt.Errorf("open vault %q: %w", name, wrongSchema(path, ver))
	}
	return v, nil
}

// migrate brings the vault from schema version ver, older than
// schemaVersion, to schemaVersion: the migrations from ver on, and the new
// version, in one write transaction, so that a crash leaves the old
// version or the new one. Another process may migrate the same file at
// once: the version is read again inside the transaction. A database
// without the vault's tables is vault_unreadable (not_avfs), found before
// anything is written to it.
func (v *Vault) migrate(ctx context.Context, ver int32) error {
	var n int
	if err := v.rdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('state', 'audit', 'checkpoints')").Scan(&n); err != nil {
		return storageErr("migrate vault", err)
	}
	if n != 3 {
		return unreadable(v.path, wire.VaultNotAVFS, "is an SQLite database but not an avfs vault (schema version %d, without the vault's tables)", ver)
	}
	tx, err := v.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (the writers' DSN)
	if err != nil {
		return storageErr("migrate vault", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&ver); err != nil {
		return storageErr("migrate vault", err)
	}
	if ver == schemaVersion {
		return nil // another process migrated it meanwhile
	}
	if ver < 1 || ver > schemaVersion {
		return wrongSchema(v.path, ver)
	}
	for ; ver < schemaVersion; ver++ {
		if _, err := tx.ExecContext(ctx, migrations[ver]); err != nil {
			return storageErr(fmt.Sprintf("migrate vault from schema version %d", ver), err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return storageErr("migrate vault", err)
	}
	if err := tx.Commit(); err != nil {
		return storageErr("migrate vault", err)
	}
	return nil
}

// openReadOnlyShm opens the vault at path on a full file system, for
// reading: Open's fallback when the readers' first query failed for lack
// of space.
//
// Why: a reader of a WAL database maps the log's shared-memory index
// (path-shm). The first connection of all to the file truncates that file
// and grows it to 32 KiB, which fails with ENOSPC on a full disk, so even
// `vault check` failed there. The fix: the readers' connections open the
// database read-only with SQLite's readonly_shm=1: the index file is opened
// read-only and never grown. When a writer elsewhere keeps the index, the
// readers use it; when none does (SQLITE_READONLY_CANTINIT), SQLite builds
// the index of the log in each connection's heap instead, reading the
// whole log (path-wal) when a read transaction starts: that is the cost,
// paid only on a full disk. The index file must exist for readonly_shm; an
// empty one is made when it is missing (a file without data needs no
// block). The log itself is opened or created empty, as before.
//
// Invariant: nothing is written to the vault, its log or its index. Such a
// Vault refuses every write transaction with no_space (its writers would
// share the read-only index and fail anyway), even once space is freed:
// open the vault again then.
func openReadOnlyShm(path string, opts Options) (*Vault, error) {
	if fi, err := os.Stat(path); err == nil {
		if f, err := os.OpenFile(path+"-shm", os.O_RDONLY|os.O_CREATE, fi.Mode().Perm()); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
				_ = f.Chown(int(st.Uid), int(st.Gid)) // as SQLite does: the vault's owner must be able to use it
			}
			f.Close()
		}
	}
	return open(path, opts, true)
}

func open(path string, opts Options, shmReadOnly bool) (*Vault, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, wire.Errorf(wire.CodeHostIO, "open vault: %w", err)
	}
	if err := registerWALVFS(); err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "open vault: %w", err)
	}
	writer, reader, replicated := writerDriverName, driverName, replicaMarked(abs)
	if replicated {
		writer, reader = writer+replicatedSuffix, reader+replicatedSuffix
	}
	db, err := sql.Open(writer, dsn(abs, true))
	if err != nil {
		return nil, storageErr("open vault", err)
	}
	rdb, err := sql.Open(reader, dsnWith(abs, false, shmReadOnly))
	if err != nil {
		db.Close()
		return nil, storageErr("open vault", err)
	}
	db.SetMaxIdleConns(4)
	rdb.SetMaxIdleConns(4)
	if opts.Actor == "" {
		opts.Actor = defaultActor()
	}
	v := &Vault{path: abs, actor: opts.Actor, auditKey: bytes.Clone(opts.AuditKey), db: db, rdb: rdb, ws: newStmtCache(db), rs: newStmtCache(rdb), readOnly: shmReadOnly, replicated: replicated}
	v.r = cq{c: v.rs}
	return v, nil
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// init writes the schema and the root directory.
func (v *Vault) init(ctx context.Context, name, parentName, parentUUID string, parentGen int64) error {
	tx, err := v.db.BeginTx(ctx, nil)
	if err != nil {
		return storageErr("create vault", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schemaSQL+indexSQL); err != nil {
		return storageErr("create vault schema", err)
	}
	now := time.Now().UnixNano()
	forked := int64(0)
	if parentName != "" {
		forked = now
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO state (id, uuid, name, created_ns, gen, next_ino, files, bytes, parent_name, parent_uuid, parent_gen, forked_ns)
		VALUES (1, ?, ?, ?, 1, 2, 0, 0, ?, ?, ?, ?)`, newUUID(), name, now, parentName, parentUUID, parentGen, forked); err != nil {
		return storageErr("create vault", err)
	}
	if parentName == "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO inodes (ino, gen_from, kind, mode, uid, gid, size, nlink, mtime_ns, ctime_ns, atime_ns)
			VALUES (1, 1, ?, ?, ?, ?, 0, 2, ?, ?, ?)`, KindDir, 0o755, os.Getuid(), os.Getgid(), now, now, now); err != nil {
			return storageErr("create vault", err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return storageErr("create vault", err)
	}
	t := &txn{ctx: ctx, tx: cq{tx: tx}, v: v, now: now}
	if t.st, err = scanState(t.tx.QueryRowContext(ctx, "SELECT "+stateCols+" FROM state WHERE id = 1")); err != nil {
		return storageErr("create vault", err)
	}
	t.orig = t.st
	details := map[string]any{"name": name}
	if parentName != "" {
		details["parent"] = parentName
		details["parent_generation"] = parentGen
	}
	t.audit("vault.create", "/", details)
	if err := t.flushAudit(); err != nil {
		return err
	}
	if err := t.saveState(); err != nil {
		return storageErr("create vault", err)
	}
	if err := tx.Commit(); err != nil {
		return storageErr("create vault", err)
	}
	return nil
}

// Path returns the vault file's absolute path.
func (v *Vault) Path() string { return v.path }

func (v *Vault) isClosed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.closed
}

// Close closes the vault (and any parent opened for a fork).
func (v *Vault) Close() error {
	if v.stopRetention() {
		// A mount's vault goes quiet here: a last pass over what its
		// writes left since the last one (none when nothing was written
		// since: an idle unmount skips its write transaction), and give
		// back what was freed.
		ctx := context.Background()
		if v.changedSincePass(ctx) {
			_, _ = v.Retain(ctx)
		}
		_, _ = v.compactIfSparse(ctx, 0)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	v.stopCheckpointer() // under mu: StartCheckpointer cannot start another
	if v.parent != nil {
		v.parent.Close()
	}
	v.ws.close()
	v.rs.close()
	err1 := v.rdb.Close()
	err2 := v.db.Close()
	if err := errors.Join(err1, err2); err != nil {
		return storageErr("close vault", err)
	}
	return nil
}

// storageErr wraps an SQLite error with the operation, turning a busy
// database into vault_busy and a full disk (SQLITE_FULL, or an I/O error
// whose errno is ENOSPC or EDQUOT) into no_space, which wraps
// syscall.ENOSPC.
func storageErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return wire.Errorf(wire.CodeInternal, "%s: %w", op, err)
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrBusy, sqlite3.ErrLocked:
			return wire.Errorf(wire.CodeVaultBusy, "%s: vault is busy: %w", op, err)
		case sqlite3.ErrFull:
			// ENOSPC too: a mount answers the writer with it.
			return wire.Errorf(wire.CodeNoSpace, "%s: disk full (%w): %w", op, syscall.ENOSPC, err)
		case sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
			// Growing the shared-memory index (SQLITE_IOERR_SHMSIZE) or
			// creating a file the log needs reports the errno only.
			if se.SystemErrno == syscall.ENOSPC || se.SystemErrno == syscall.EDQUOT {
				return wire.Errorf(wire.CodeNoSpace, "%s: disk full (%w): %w", op, syscall.ENOSPC, err)
			}
		}
		switch se.Code {
		case sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
			return wire.Errorf(wire.CodeIntegrity, "%s: vault file is damaged: %w", op, err)
		case sqlite3.ErrReadonly, sqlite3.ErrPerm, sqlite3.ErrCantOpen, sqlite3.ErrIoErr:
			return wire.Errorf(wire.CodeHostIO, "%s: %w", op, err)
		}
	}
	return wire.Errorf(wire.CodeInternal, "%s: %w", op, err)
}
