package vault

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"avfs/wire"
)

// forkPhase, when set (by tests), is called at the end of each phase of a
// fork with the phase's name.
var forkPhase func(name string)

func phase(name string) {
	if forkPhase != nil {
		forkPhase(name)
	}
}

// Fork makes a new vault dst that starts as src's current state. It copies
// metadata only: file content stays in src (or src's ancestors) and is read
// from there, and src keeps the state the fork borrows from (like a
// checkpoint) until the fork is detached or deleted. Writes in either vault
// never show in the other.
//
// The fork is built in <vaults>/.dst.UUID.tmp, which the forking process
// holds locked (flock) from before src records the fork until the file is
// linked to dst's name. A fork killed before that leaves its record in src
// and its temporary file; src's next gc or delete releases and removes
// them (recoverForks), never those of a fork under way in a live process.
func (s *Store) Fork(ctx context.Context, src, dst string) (*Vault, error) {
	if _, err := s.fork(ctx, src, dst); err != nil {
		return nil, err
	}
	// The fork was just built with this schema version: no need to check it.
	return open(s.PathOf(dst), s.Opts, false)
}

// ForkInfo forks like Fork and returns the new vault's Info instead of
// opening it.
func (s *Store) ForkInfo(ctx context.Context, src, dst string) (Info, error) {
	return s.fork(ctx, src, dst)
}

func (s *Store) fork(ctx context.Context, src, dst string) (Info, error) {
	if err := ValidName(dst); err != nil {
		return Info{}, err
	}
	if err := ValidName(src); err != nil {
		return Info{}, err
	}
	pageSize, err := pageSizeOf(s.Opts)
	if err != nil {
		return Info{}, err
	}
	path, err := filepath.Abs(s.PathOf(dst))
	if err != nil {
		return Info{}, wire.Errorf(wire.CodeHostIO, "fork vault: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		return Info{}, wire.Errorf(wire.CodeAlreadyExists, "fork vault: %q already exists", dst).With("vault", dst)
	}
	// The fork is built in a temporary file, locked from before the pin is
	// committed until the file is linked into place (or the pin released)
	// and removed: the lock proves the fork alive to recoverForks.
	uuid, tmp, lock, err := createForkTmp(filepath.Dir(path), dst)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Info{}, wire.Errorf(wire.CodeVaultNotFound, "fork vault: no vault %q", src).With("vault", src)
		}
		return Info{}, wire.Errorf(wire.CodeHostIO, "fork vault: %w", err)
	}
	defer lock.Close()
	defer removeFiles(tmp)
	// The new file and its schema do not depend on the parent: make them
	// while the parent is opened and pinned.
	prepared := make(chan *forkBuild, 1)
	go func() { prepared <- prepareFork(ctx, tmp, pageSize) }()
	var b *forkBuild
	defer func() {
		if b == nil {
			b = <-prepared
		}
		b.close()
	}()
	// Only the parent's writer connection is used: for the pin.
	parent, err := openWriter(ctx, s.PathOf(src), s.Opts)
	if err != nil {
		return Info{}, err
	}
	defer func() { parent.Close(); phase("parent close") }()
	phase("parent open")
	var pst state
	// Pin src's state: the fork point is a generation src keeps.
	err = parent.update(ctx, "fork vault", func(t *txn) error {
		pst = t.st
		if _, err := t.tx.ExecContext(ctx, "INSERT INTO forks (uuid, name, gen, created_ns) VALUES (?, ?, ?, ?)", uuid, dst, t.st.gen, t.now); err != nil {
			return err
		}
		t.st.gen++
		t.audit("vault.fork", "/", map[string]any{"fork": dst, "generation": pst.gen})
		return nil
	})
	if err != nil {
		return Info{}, err
	}
	phase("pin")
	// The pin must be durable before the fork exists, and commits in WAL
	// mode are not synced: sync the parent's WAL while the fork is built.
	pinSynced := make(chan error, 1)
	go func() { pinSynced <- syncFile(parent.path + "-wal") }()
	b = <-prepared
	phase("prepared")
	info, err := s.createFork(ctx, b, parent, path, tmp, dst, uuid, pst, pinSynced)
	if err != nil {
		// Release the pin; the fork was not made.
		p := parent
		if p.isClosed() {
			if p, err = openWriter(ctx, s.PathOf(src), s.Opts); err != nil {
				return Info{}, err
			}
			defer p.Close()
		}
		_ = p.update(ctx, "fork vault", func(t *txn) error {
			_, err := t.tx.ExecContext(ctx, "DELETE FROM forks WHERE uuid = ?", uuid)
			return err
		})
		return Info{}, err
	}
	return info, nil
}

// createFork fills the prepared fork file b and links it into place at
// path once it is complete and synced, and the parent's pin too.
func (s *Store) createFork(ctx context.Context, b *forkBuild, parent *Vault, path, tmp, dst, uuid string, pst state, pinSynced <-chan error) (Info, error) {
	actor := s.Opts.Actor
	if actor == "" {
		actor = defaultActor()
	}
	now := time.Now().UnixNano()
	if err := b.fill(ctx, parent, dst, uuid, pst, now, actor); err != nil {
		return Info{}, storageErr("fork vault", err)
	}
	if err := syncFile(tmp); err != nil {
		return Info{}, wire.Errorf(wire.CodeHostIO, "fork vault: sync %s: %w", tmp, err)
	}
	phase("fsync")
	if err := <-pinSynced; err != nil {
		return Info{}, wire.Errorf(wire.CodeHostIO, "fork vault: sync %s: %w", parent.path, err)
	}
	phase("pin sync")
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return Info{}, wire.Errorf(wire.CodeAlreadyExists, "fork vault: %q already exists", dst).With("vault", dst)
		}
		return Info{}, wire.Errorf(wire.CodeHostIO, "fork vault: %w", err)
	}
	// The new name must survive a crash as well.
	dir := filepath.Dir(path)
	if err := syncFile(dir); err != nil {
		return Info{}, wire.Errorf(wire.CodeHostIO, "fork vault: sync %s: %w", dir, err)
	}
	phase("link")
	st := pst
	st.name, st.uuid, st.gen = dst, uuid, 1
	info := Info{Name: dst, UUID: uuid, Path: path, CreatedAt: time.Unix(0, now), Files: pst.files, Bytes: pst.bytes,
		Quota: quotaOf(st), Generation: 1, Forks: []ForkRef{},
		Parent: &ForkPoint{Name: pst.name, UUID: pst.uuid, Generation: pst.gen, ForkedAt: time.Unix(0, now)}}
	if fi, err := os.Stat(path); err == nil {
		info.FileSize = fi.Size()
	}
	return info, nil
}

// syncFile fsyncs the file or directory at p; a missing file is fine.
func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// forkBuild is a fork's file while it is built: with no journal (the file
// is thrown away on any failure) and small page caches, because every page
// of memory a process touches for the first time costs a page fault, more
// than writing a page out to the file and reading it back.
type forkBuild struct {
	db   *sql.DB
	conn *sql.Conn
	err  error
}

// prepareFork writes into the (empty) file tmp the vault schema and its
// indexes (kept during the copy rather than built after it: a sort costs
// more fresh memory).
func prepareFork(ctx context.Context, tmp string, pageSize int) *forkBuild {
	b := &forkBuild{}
	if b.db, b.err = sql.Open("sqlite3", "file:"+tmp+"?_journal_mode=OFF&_synchronous=OFF"); b.err != nil {
		return b
	}
	b.db.SetMaxOpenConns(1)
	if b.conn, b.err = b.db.Conn(ctx); b.err != nil {
		return b
	}
	// Page size and auto_vacuum before the first table: a fork has a new
	// vault's page size (PageSize), and can give freed pages back like any
	// vault (see compactIfSparse).
	b.err = b.exec(ctx, fmt.Sprintf("PRAGMA page_size = %d; ", pageSize)+"PRAGMA auto_vacuum = INCREMENTAL; PRAGMA cache_size = 64; BEGIN; "+schemaSQL+indexSQL+fmt.Sprintf("PRAGMA user_version = %d; COMMIT", schemaVersion))
	return b
}

func (b *forkBuild) exec(ctx context.Context, query string, args ...any) error {
	_, err := b.conn.ExecContext(ctx, query, args...)
	return err
}

// close closes the build's connection (idempotent).
func (b *forkBuild) close() error {
	var errs []error
	if b.conn != nil {
		errs = append(errs, b.conn.Close())
		b.conn = nil
	}
	if b.db != nil {
		errs = append(errs, b.db.Close())
		b.db = nil
	}
	return errors.Join(errs...)
}

// fill copies the metadata of parent visible at the pinned generation,
// writes the fork's state and audit rows, and switches the file to WAL.
// It closes parent once it no longer needs it, and the build.
func (b *forkBuild) fill(ctx context.Context, parent *Vault, dst, uuid string, pst state, now int64, actor string) error {
	if b.err != nil {
		return b.err
	}
	if err := b.exec(ctx, "ATTACH DATABASE ? AS src", "file:"+parent.path+"?mode=ro"); err != nil {
		return err
	}
	if err := b.exec(ctx, "PRAGMA src.cache_size = 16"); err != nil {
		return err
	}
	tx, err := b.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	g := pst.gen
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO main.state (id, uuid, name, created_ns, gen, next_ino, files, bytes, max_bytes, max_files, max_file_bytes, parent_name, parent_uuid, parent_gen, forked_ns,
				keep_versions, keep_age_s, history_pct, history_min_mb)
			VALUES (1, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{uuid, dst, now, pst.nextIno, pst.files, pst.bytes, pst.maxBytes, pst.maxFiles, pst.maxFileBytes, pst.name, pst.uuid, g, now,
				pst.retention.Versions, pst.retention.MaxAgeS, pst.retention.HistoryPct, pst.retention.HistoryMinMB}},
		{`INSERT INTO main.inodes (` + inodeCols + `)
			SELECT ino, 1, kind, mode, uid, gid, size, nlink, mtime_ns, ctime_ns, atime_ns, target, chunks, xattrs FROM src.inodes
			WHERE gen_from <= ? AND gen_to > ? ORDER BY ino`, []any{g, g}},
		{`INSERT INTO main.dentries (parent, name, gen_from, ino)
			SELECT parent, name, 1, ino FROM src.dentries WHERE gen_from <= ? AND gen_to > ? ORDER BY parent, name`, []any{g, g}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			return err
		}
		phase(q.sql[:min(len(q.sql), 24)])
	}
	t := &txn{ctx: ctx, tx: cq{tx: tx}, v: &Vault{actor: actor, auditKey: parent.auditKey}, now: now}
	if t.st, err = scanState(t.tx.QueryRowContext(ctx, "SELECT "+stateCols+" FROM state WHERE id = 1")); err != nil {
		return err
	}
	t.orig = t.st
	t.audit("vault.fork", "/", map[string]any{"name": dst, "parent": pst.name, "parent_generation": g})
	if err := t.flushAudit(); err != nil {
		return err
	}
	if err := t.saveState(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	phase("audit+commit")
	// Close the parent while src is still attached here: its last
	// connection then does not checkpoint the WAL on close, which the pin
	// does not need (its WAL is synced) and which would cost a sync of the
	// whole parent file.
	parent.Close()
	if err := b.exec(ctx, "DETACH DATABASE src"); err != nil {
		return err
	}
	if err := b.exec(ctx, "PRAGMA journal_mode = WAL"); err != nil {
		return err
	}
	err = b.close()
	phase("wal+close")
	return err
}

// parentVault opens (once) the vault a fork borrows from; nil when v is not a fork.
func (v *Vault) parentVault(ctx context.Context) (*Vault, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.parent != nil {
		return v.parent, nil
	}
	var name, uuid string
	if err := v.rdb.QueryRowContext(ctx, "SELECT parent_name, parent_uuid FROM state WHERE id = 1").Scan(&name, &uuid); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, nil
	}
	p, err := Open(ctx, filepath.Join(filepath.Dir(v.path), name+fileExt), Options{Actor: v.actor, AuditKey: v.auditKey})
	if err != nil {
		return nil, wire.Errorf(wire.CodeIntegrity, "this fork's parent vault %q cannot be opened: %w", name, err)
	}
	var puuid string
	if err := p.rdb.QueryRowContext(ctx, "SELECT uuid FROM state WHERE id = 1").Scan(&puuid); err != nil || puuid != uuid {
		p.Close()
		return nil, wire.Errorf(wire.CodeIntegrity, "this fork's parent vault %q was replaced (uuid %s, expected %s)", name, puuid, uuid)
	}
	v.parent = p
	return p, nil
}

// Detach makes the fork name stand alone: it copies every chunk it borrows
// from its ancestors into its own file and releases the parent's pin.
func (s *Store) Detach(ctx context.Context, name string) error {
	return s.DetachWith(ctx, name, DetachOptions{})
}

// DetachOptions says how Detach reports its work.
type DetachOptions struct {
	// Progress is told the chunks the fork refers to that were looked at
	// (items) and the bytes of those copied from its ancestors, against
	// the number of chunks (the bytes to copy are not known before).
	Progress ProgressFunc
}

// DetachWith is Detach, reporting as opt says.
func (s *Store) DetachWith(ctx context.Context, name string, opt DetachOptions) error {
	v, err := s.Open(ctx, name)
	if err != nil {
		return err
	}
	defer v.Close()
	var parentName, parentUUID, uuid string
	if err := v.rdb.QueryRowContext(ctx, "SELECT parent_name, parent_uuid, uuid FROM state WHERE id = 1").Scan(&parentName, &parentUUID, &uuid); err != nil {
		return storageErr("detach vault", err)
	}
	if parentName == "" {
		return wire.Errorf(wire.CodeInvalidInput, "detach vault %q: it is not a fork", name).With("vault", name)
	}
	if _, err := v.parentVault(ctx); err != nil {
		return fmt.Errorf("detach vault %q: %w", name, err)
	}
	var final Work // for opt.Progress
	err = v.update(ctx, "detach vault", func(t *txn) error {
		hashes, err := referencedHashes(ctx, t.tx)
		if err != nil {
			return err
		}
		copied := 0
		var done Work
		total := Work{Items: int64(len(hashes))}
		opt.Progress.report(done, total)
		for h := range hashes {
			if done.Items > 0 {
				opt.Progress.report(done, total)
			}
			done.Items++
			var one int
			err := t.tx.QueryRowContext(ctx, "SELECT 1 FROM chunks WHERE hash = ?", []byte(h)).Scan(&one)
			if err == nil {
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			data, err := v.chunkData(ctx, t.tx, []byte(h))
			if err != nil {
				return err
			}
			if _, err := t.tx.ExecContext(ctx, "INSERT INTO chunks (hash, size, data) VALUES (?, ?, ?)", []byte(h), len(data), data); err != nil {
				return err
			}
			t.st.chunkBytes += int64(len(data))
			copied++
			done.Bytes += int64(len(data))
		}
		final = done
		t.st.parentName, t.st.parentUUID, t.st.parentGen, t.st.forkedNS = "", "", 0, 0
		t.audit("vault.detach", "/", map[string]any{"parent": parentName, "chunks_copied": copied})
		return nil
	})
	if err != nil {
		return err
	}
	v.mu.Lock()
	if v.parent != nil {
		v.parent.Close()
		v.parent = nil
	}
	v.mu.Unlock()
	if err := s.unregisterFork(ctx, parentName, uuid); err != nil && !wire.HasCode(err, wire.CodeVaultNotFound) {
		return fmt.Errorf("detach vault %q: %w", name, err)
	}
	opt.Progress.report(final, final)
	return nil
}

// unregisterFork releases the pin a fork holds on its parent.
func (s *Store) unregisterFork(ctx context.Context, parent, uuid string) error {
	p, err := s.Open(ctx, parent)
	if err != nil {
		return err
	}
	defer p.Close()
	return p.update(ctx, "release fork", func(t *txn) error {
		r, err := t.tx.ExecContext(ctx, "DELETE FROM forks WHERE uuid = ?", uuid)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n > 0 {
			t.audit("vault.fork_released", "/", map[string]any{"fork_uuid": uuid})
		}
		return nil
	})
}

// referencedHashes returns every chunk hash the vault's rows refer to: all
// inode generations kept and all history versions.
func referencedHashes(ctx context.Context, q querier) (map[string]struct{}, error) {
	return hashesIn(ctx, q, sqlQuery{sql: "SELECT chunks FROM inodes WHERE kind = 1"}, sqlQuery{sql: "SELECT chunks FROM versions WHERE kind = 1"})
}

// sqlQuery is a query with its arguments.
type sqlQuery struct {
	sql  string
	args []any
}

// hashesIn returns every chunk hash in the content maps the queries
// select (a column of content maps each), the zero hash of holes left out.
func hashesIn(ctx context.Context, q querier, queries ...sqlQuery) (map[string]struct{}, error) {
	set := map[string]struct{}{}
	for _, query := range queries {
		rows, err := q.QueryContext(ctx, query.sql, query.args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				rows.Close()
				return nil, err
			}
			for i := 0; i+hashLen <= len(b); i += hashLen {
				set[string(b[i:i+hashLen])] = struct{}{}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	delete(set, string(zeroHash))
	return set, nil
}

// Info describes the vault.
func (v *Vault) Info(ctx context.Context) (Info, error) {
	var info Info
	err := v.view(ctx, "vault info", func(q querier, st state) error {
		info = Info{Name: st.name, UUID: st.uuid, Path: v.path, CreatedAt: time.Unix(0, st.createdNS), Files: st.files, Bytes: st.bytes,
			Quota: quotaOf(st), Generation: st.gen, Forks: []ForkRef{}}
		if st.parentName != "" {
			info.Parent = &ForkPoint{Name: st.parentName, UUID: st.parentUUID, Generation: st.parentGen, ForkedAt: time.Unix(0, st.forkedNS)}
		}
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM checkpoints").Scan(&info.Checkpoints); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, "SELECT name, uuid, created_ns FROM forks ORDER BY created_ns")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f ForkRef
			var ns int64
			if err := rows.Scan(&f.Name, &f.UUID, &ns); err != nil {
				return err
			}
			f.CreatedAt = time.Unix(0, ns)
			info.Forks = append(info.Forks, f)
		}
		return rows.Err()
	})
	for _, p := range []string{v.path, v.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			info.FileSize += fi.Size()
		}
	}
	return info, err
}
