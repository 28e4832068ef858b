package vault

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"syscall"
	"time"

	"avfs/wire"
)

// state is the single row of the state table, read once per transaction.
type state struct {
	uuid, name                       string
	createdNS, gen, nextIno          int64
	files, bytes                     int64
	maxBytes, maxFiles, maxFileBytes int64
	parentName, parentUUID           string
	parentGen, forkedNS              int64
	auditID                          int64  // the audit chain's head: last row id
	auditHash                        string // and its hash
	dirEpoch                         int64  // bumped when directory paths may change (see Vault.dirs)
	chunkBytes                       int64  // stored bytes of all chunks
	retainAt                         int64  // retention runs once chunkBytes reaches this (see retentionDue)
	retention                        Retention
}

const stateCols = `uuid, name, created_ns, gen, next_ino, files, bytes, max_bytes, max_files, max_file_bytes, parent_name, parent_uuid, parent_gen, forked_ns, audit_id, audit_hash, dir_epoch, chunk_bytes, retain_at, keep_versions, keep_age_s, history_pct, history_min_mb`

func scanState(row *sql.Row) (state, error) {
	var s state
	err := row.Scan(&s.uuid, &s.name, &s.createdNS, &s.gen, &s.nextIno, &s.files, &s.bytes,
		&s.maxBytes, &s.maxFiles, &s.maxFileBytes, &s.parentName, &s.parentUUID, &s.parentGen, &s.forkedNS, &s.auditID, &s.auditHash, &s.dirEpoch,
		&s.chunkBytes, &s.retainAt, &s.retention.Versions, &s.retention.MaxAgeS, &s.retention.HistoryPct, &s.retention.HistoryMinMB)
	return s, err
}

// querier is what read helpers need: a transaction or a database.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// txn is one write transaction: the state row, counters, audit rows.
type txn struct {
	ctx      context.Context
	tx       cq
	v        *Vault
	st       state
	orig     state
	now      int64
	audits   []auditRow
	paths    map[int64]string // inode paths looked up in this transaction
	dirPaths map[int64]string // the directories among them
	tree     bool             // the transaction changes the file tree (inodes or dentries)

	forgetVersions bool // versions were removed: the connection's cache of newest versions is stale

	// Retention is kicked after a commit that grew the stored bytes,
	// except one that only staged chunks (stageOnly: they are nobody's
	// history, and the live bytes the budget counts do not hold them yet),
	// and after one that committed staged chunks (stagedIn: their bytes
	// were counted when staged).
	stageOnly, stagedIn bool

	wc   *writeCache       // what earlier transactions of this connection left; nil when unknown
	vers map[int64]Version // newest history version per inode seen or written here
}

// writeCache is what the writers' connection knows of the vault after its
// last commit: the state row and the newest history version of the files
// it touched. It saves each write transaction the reads of them, and holds
// only while no other connection has committed since, which SQLite tells
// through PRAGMA data_version (it changes when another connection, in this
// process or another, committed). It is guarded by the connection's lock.
type writeCache struct {
	ok       bool
	dataVer  int64
	st       state
	versions map[int64]Version // N 0: the file has no history
}

// maxCachedVersions bounds writeCache.versions; past it the map restarts.
const maxCachedVersions = 1 << 16

// reset forgets everything.
func (c *writeCache) reset() {
	c.ok = false
	c.versions = nil
}

// newestVersion is the newest history version of ino known without a
// query; ok is false when it is not known.
func (t *txn) newestVersion(ino int64) (Version, bool) {
	if v, ok := t.vers[ino]; ok {
		return v, true
	}
	if t.wc != nil {
		v, ok := t.wc.versions[ino]
		return v, ok
	}
	return Version{}, false
}

// noteVersion remembers v as ino's newest history version (in the
// database as this transaction sees it).
func (t *txn) noteVersion(ino int64, v Version) {
	if t.vers == nil {
		t.vers = map[int64]Version{}
	}
	t.vers[ino] = v
}

// committed hands what the transaction learnt to the connection's cache.
func (t *txn) committed(c *writeCache, dataVer int64) {
	c.ok, c.dataVer, c.st = true, dataVer, t.st
	if c.versions == nil || len(c.versions)+len(t.vers) > maxCachedVersions || t.forgetVersions {
		c.versions = make(map[int64]Version, len(t.vers))
	}
	for ino, v := range t.vers {
		c.versions[ino] = v
	}
}

type auditRow struct {
	op, path string
	details  map[string]any
}

// update runs fn in one BEGIN IMMEDIATE transaction. Quotas are checked and
// the audit rows appended before commit; any error rolls everything back.
func (v *Vault) update(ctx context.Context, op string, fn func(t *txn) error) error {
	if v.readOnly {
		return wire.Errorf(wire.CodeNoSpace, "%s: disk full (%w): the vault was opened for reading only, on a full file system", op, syscall.ENOSPC)
	}
	tx, done, err := v.ws.begin(ctx)
	if err != nil {
		return storageErr(op, err)
	}
	defer done()
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	t := &txn{ctx: ctx, tx: tx, v: v, now: time.Now().UnixNano()}
	wc := &tx.c.wc // guarded by the connection's lock, which the transaction holds
	var dataVer int64
	if err := tx.QueryRowContext(ctx, "PRAGMA data_version").Scan(&dataVer); err != nil {
		return storageErr(op, err)
	}
	if wc.ok && wc.dataVer == dataVer {
		t.st, t.wc = wc.st, wc
	} else {
		wc.reset()
		if t.st, err = scanState(t.tx.QueryRowContext(ctx, "SELECT "+stateCols+" FROM state WHERE id = 1")); err != nil {
			return storageErr(op, err)
		}
	}
	// Should this transaction fail or panic, the next one reads afresh.
	wc.ok = false
	t.orig = t.st
	if err := fn(t); err != nil {
		return wrapOp(op, err)
	}
	if t.tree && !mountedHere(v.path) {
		if err := refuseIfMounted(t, op); err != nil {
			return err
		}
	}
	if err := t.checkQuota(); err != nil {
		return wrapOp(op, err)
	}
	if err := t.flushAudit(); err != nil {
		return wrapOp(op, err)
	}
	grew := t.st.chunkBytes > t.orig.chunkBytes
	if err := t.saveState(); err != nil {
		return storageErr(op, err)
	}
	if err := tx.Commit(); err != nil {
		wc.reset()
		return storageErr(op, err)
	}
	committed = true
	t.committed(wc, dataVer)
	v.rememberDirs(t.st.dirEpoch, t.dirPaths)
	if (grew && !t.stageOnly) || t.stagedIn {
		v.kickRetention(t.st)
	}
	v.kickCheckpointer()
	return nil
}

// saveState writes the state row if the transaction changed it.
func (t *txn) saveState() error {
	if t.st == t.orig {
		return nil
	}
	_, err := t.tx.ExecContext(t.ctx, `UPDATE state SET gen=?, next_ino=?, files=?, bytes=?, max_bytes=?, max_files=?, max_file_bytes=?, parent_name=?, parent_uuid=?, parent_gen=?, forked_ns=?, name=?, audit_id=?, audit_hash=?, dir_epoch=?,
		chunk_bytes=?, retain_at=?, keep_versions=?, keep_age_s=?, history_pct=?, history_min_mb=? WHERE id = 1`,
		t.st.gen, t.st.nextIno, t.st.files, t.st.bytes, t.st.maxBytes, t.st.maxFiles, t.st.maxFileBytes,
		t.st.parentName, t.st.parentUUID, t.st.parentGen, t.st.forkedNS, t.st.name, t.st.auditID, []byte(t.st.auditHash), t.st.dirEpoch,
		t.st.chunkBytes, t.st.retainAt, t.st.retention.Versions, t.st.retention.MaxAgeS, t.st.retention.HistoryPct, t.st.retention.HistoryMinMB)
	if err == nil {
		t.orig = t.st
	}
	return err
}

// view runs fn in one read transaction (a consistent snapshot).
func (v *Vault) view(ctx context.Context, op string, fn func(q querier, st state) error) error {
	tx, err := v.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return storageErr(op, err)
	}
	defer tx.Rollback()
	q := cq{tx: tx, c: v.rs}
	st, err := scanState(q.QueryRowContext(ctx, "SELECT "+stateCols+" FROM state WHERE id = 1"))
	if err != nil {
		return storageErr(op, err)
	}
	if err := fn(q, st); err != nil {
		return wrapOp(op, err)
	}
	return nil
}

// wrapOp prefixes err with op; storage errors become typed errors.
func wrapOp(op string, err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return storageErr(op, err)
}

// checkQuota fails with quota_exceeded when the transaction grew the vault past a quota.
func (t *txn) checkQuota() error {
	s := t.st
	if s.maxBytes > 0 && s.bytes > s.maxBytes && s.bytes > t.orig.bytes {
		return wire.Errorf(wire.CodeQuotaExceeded, "vault size quota exceeded: %d bytes would exceed max_size_mb=%d", s.bytes, s.maxBytes>>20).
			With("quota", "max_size_mb").With("limit", s.maxBytes>>20).With("bytes", s.bytes)
	}
	if s.maxFiles > 0 && s.files > s.maxFiles && s.files > t.orig.files {
		return wire.Errorf(wire.CodeQuotaExceeded, "vault file quota exceeded: %d files would exceed max_files=%d", s.files, s.maxFiles).
			With("quota", "max_files").With("limit", s.maxFiles).With("files", s.files)
	}
	return nil
}

// audit queues one audit row, written in the same transaction, with its
// MAC when the vault was opened with an audit key (flushAudit). The path
// column keeps the raw bytes; details are stored as JSON, so a string
// detail that is not valid UTF-8 (a move's "to", a symlink's "target")
// gets its companion KEY_b64 (wire.B64) in a copy of details.
func (t *txn) audit(op, path string, details map[string]any) {
	t.audits = append(t.audits, auditRow{op: op, path: path, details: withB64(details)})
}

// withB64 returns details, or a copy with KEY_b64 beside each string
// detail that is not valid UTF-8.
func withB64(details map[string]any) map[string]any {
	var out map[string]any
	for k, v := range details {
		if s, ok := v.(string); ok && wire.B64(s) != "" {
			if out == nil {
				out = maps.Clone(details)
			}
			out[k+"_b64"] = wire.B64(s)
		}
	}
	if out == nil {
		return details
	}
	return out
}

func (t *txn) flushAudit() error {
	if len(t.audits) == 0 {
		return nil
	}
	// The chain's head lives in the state row, read at the start of the transaction.
	id, prev := t.st.auditID, []byte(t.st.auditHash)
	if len(prev) == 0 {
		prev = make([]byte, sha256.Size)
	}
	for _, a := range t.audits {
		id++
		details := "{}"
		if a.details != nil {
			b, err := json.Marshal(a.details)
			if err != nil {
				return err
			}
			details = string(b)
		}
		h := auditHash(prev, id, t.now, a.op, a.path, details, t.v.actor)
		mac := []byte{}
		if t.v.auditKey != nil {
			mac = auditMAC(t.v.auditKey, h)
		}
		if _, err := t.tx.ExecContext(t.ctx, "INSERT INTO audit (id, time_ns, op, path, details, actor, prev_hash, hash, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			id, t.now, a.op, a.path, details, t.v.actor, prev, h, mac); err != nil {
			return err
		}
		prev = h
	}
	t.audits = nil
	t.st.auditID, t.st.auditHash = id, string(prev)
	return nil
}

// auditMAC anchors an audit row: HMAC-SHA256 under the installation's
// audit key of the row's chain hash, which covers the row and, through
// prev_hash, every row before it. Without the key nobody can write a row,
// edit one or re-chain the log after removing rows and give the rows
// MACs that verify.
func auditMAC(key, hash []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(hash)
	return m.Sum(nil)
}

// auditHash chains an audit row to the previous one.
func auditHash(prev []byte, id, timeNS int64, op, path, details, actor string) []byte {
	h := sha256.New()
	h.Write(prev)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(id))
	h.Write(n[:])
	binary.BigEndian.PutUint64(n[:], uint64(timeNS))
	h.Write(n[:])
	for _, s := range []string{op, path, details, actor} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return h.Sum(nil)
}
