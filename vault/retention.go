package vault

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"avfs/wire"
)

// Retention is how much file history a vault keeps; see
// wire.VaultRetention for the rules and what they never remove.
//
// Every write records a version of the file it changed, and a version
// holds the file's content map: 50,000 small random writes to a 30 MiB
// file leave 50,000 versions and as many 64 KiB chunks that only history
// refers to (GBs for MBs of live data), and a tree written and deleted
// again and again keeps every deleted file's content. Retention bounds
// that without anyone running prune or gc:
//
//   - Cost: a pass reads the versions' keys and the content maps of the
//     versions it keeps or removes, the live and pinned inode rows, and
//     deletes what nothing refers to, in one write transaction; in steady
//     state that is O(live files + kept history), not O(writes ever made).
//   - Fix: the vault counts the stored bytes of its chunks
//     (state.chunk_bytes) in the transaction that adds or removes them, and
//     a pass runs once that count has grown by the slack (retentionSlack)
//     since the last pass: in the background of a process that called
//     StartRetention (the one serving the mount), at the end of each run
//     (RetainIfDue), and in gc.
//   - Invariant: after a pass, the chunks only history holds are within
//     the budget (HistoryPct of the live bytes, at least HistoryMinMB) and
//     every file has at most Versions versions and none older than MaxAgeS,
//     apart from the versions the rules never remove; so the vault file
//     stays within live data + checkpoints + budget + slack, plus metadata.
type Retention = wire.VaultRetention

// The defaults of a new vault (and of one migrated to schema version 3),
// as SQL literals for the schema.
const (
	defaultKeepVersions = "32"
	defaultKeepAgeS     = "2592000" // 30 days
	defaultHistoryPct   = "50"
	defaultHistoryMinMB = "16"
)

// DefaultRetention is what a new vault keeps.
func DefaultRetention() Retention {
	return Retention{Versions: 32, MaxAgeS: 30 * 24 * 3600, HistoryPct: 50, HistoryMinMB: 16}
}

// RetentionChange sets the settings that are non-nil (0 turns a rule off).
type RetentionChange struct {
	Versions     *int64
	MaxAgeS      *int64
	HistoryPct   *int64
	HistoryMinMB *int64
}

// historyBudget is how many bytes history alone may hold in st: 0 when
// there is no byte budget.
func historyBudget(st state) int64 {
	r := st.retention
	if r.HistoryPct == 0 {
		return 0
	}
	return max(st.bytes/100*r.HistoryPct, r.HistoryMinMB<<20)
}

// retentionSlack is how far the stored bytes may grow past what the last
// pass left before the next pass runs: half the budget, at least 8 MiB.
func retentionSlack(st state) int64 {
	return max(historyBudget(st)/2, 8<<20)
}

// retentionDue reports whether a pass should run in st.
func retentionDue(st state) bool {
	return !st.retention.Off() && st.chunkBytes >= st.retainAt
}

// SetRetention changes the vault's retention settings and returns them.
// It fails with invalid_input on a negative setting or a percentage above
// 10,000. It removes nothing itself: the next pass (the next write in a
// retaining process, the next run, or gc) applies them.
func (v *Vault) SetRetention(ctx context.Context, c RetentionChange) (Retention, error) {
	var r Retention
	for _, p := range []*int64{c.Versions, c.MaxAgeS, c.HistoryPct, c.HistoryMinMB} {
		if p != nil && *p < 0 {
			return r, wire.Errorf(wire.CodeInvalidInput, "set retention: settings must be 0 (off) or positive")
		}
	}
	if c.HistoryPct != nil && *c.HistoryPct > 10000 {
		return r, wire.Errorf(wire.CodeInvalidInput, "set retention: history_pct is a percentage of the live data (at most 10000)")
	}
	err := v.update(ctx, "set retention", func(t *txn) error {
		for _, s := range []struct {
			p   *int64
			dst *int64
		}{{c.Versions, &t.st.retention.Versions}, {c.MaxAgeS, &t.st.retention.MaxAgeS}, {c.HistoryPct, &t.st.retention.HistoryPct}, {c.HistoryMinMB, &t.st.retention.HistoryMinMB}} {
			if s.p != nil {
				*s.dst = *s.p
			}
		}
		t.st.retainAt = 0 // the new settings apply at the next chance
		r = t.st.retention
		t.audit("retention.set", "/", map[string]any{"versions": r.Versions, "max_age_s": r.MaxAgeS, "history_pct": r.HistoryPct, "history_min_mb": r.HistoryMinMB})
		return nil
	})
	return r, err
}

// RetentionStatus returns the vault's settings and where its history
// stands (see wire.RetentionResult; Vault is left empty).
func (v *Vault) RetentionStatus(ctx context.Context) (wire.RetentionResult, error) {
	var res wire.RetentionResult
	err := v.view(ctx, "retention", func(q querier, st state) error {
		res.Retention, res.LiveBytes, res.StoredBytes, res.BudgetBytes = st.retention, st.bytes, st.chunkBytes, historyBudget(st)
		return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM versions").Scan(&res.Versions)
	})
	return res, err
}

// RetainResult says what a retention pass removed.
type RetainResult struct {
	Versions   int64 // versions removed
	Rows       int64 // inode and directory-entry rows nothing needed any more
	Chunks     int64 // chunks nothing referred to any more
	BytesFreed int64 // their stored bytes
}

// holds counts, per vault path, the deleted files this process still
// reads through open descriptors (see Hold).
var holds sync.Map // path -> *holdSet

type holdSet struct {
	mu   sync.Mutex
	inos map[int64]int
}

func holdsOf(path string) *holdSet {
	h, _ := holds.LoadOrStore(path, &holdSet{inos: map[int64]int{}})
	return h.(*holdSet)
}

// Hold keeps the newest version of file ino, and so its content, from
// retention until release is called: a mount calls it when a file loses
// its last name while open, since the open file goes on reading the
// content only that version then refers to. It holds for every Vault of
// the same path in this process; release is idempotent. A process that
// retains while another holds the vault's writer mount keeps the newest
// version of every deleted file instead (it cannot see the other's holds).
func (v *Vault) Hold(ino uint64) (release func()) {
	h := holdsOf(v.path)
	h.mu.Lock()
	h.inos[int64(ino)]++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			if h.inos[int64(ino)]--; h.inos[int64(ino)] <= 0 {
				delete(h.inos, int64(ino))
			}
			h.mu.Unlock()
		})
	}
}

func (h *holdSet) has(ino int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inos[ino] > 0
}

// retainSelection is what a pass removes: the versions' keys, in the order
// selected.
type retainSelection struct {
	keys [][2]int64
}

// selectRetention selects, read in q as of now (ns), the versions the
// vault's retention settings in st remove (see Retention). keepDeleted
// keeps the newest version of every deleted file (another process's
// writer mount may still read it). Cost: one pass over the versions'
// keys, and the content maps of the versions the byte budget walks (the
// newest first, until the budget is spent) plus those of the live and
// pinned inode rows.
func (v *Vault) selectRetention(ctx context.Context, q querier, st state, now int64, keepDeleted bool) (retainSelection, error) {
	var sel retainSelection
	r := st.retention
	if r.Off() {
		return sel, nil
	}
	cutoff := int64(0)
	if r.MaxAgeS > 0 {
		cutoff = now - r.MaxAgeS*int64(time.Second)
	}
	budget := historyBudget(st)
	held := holdsOf(v.path)
	rows, err := q.QueryContext(ctx, `SELECT w.ino, w.n, w.time_ns, w.rn, w.size,
		EXISTS (SELECT 1 FROM inodes i WHERE i.ino = w.ino AND i.gen_to = `+liveSQL+`),
		EXISTS (SELECT 1 FROM checkpoints c JOIN inodes i ON i.ino = w.ino AND i.gen_from <= c.gen AND i.gen_to > c.gen
			WHERE i.kind = w.kind AND i.mode = w.mode AND i.size = w.size AND i.target = w.target
			AND i.chunks = (SELECT x.chunks FROM versions x WHERE x.ino = w.ino AND x.n = w.n))
		FROM (SELECT ino, n, time_ns, kind, mode, size, target, ROW_NUMBER() OVER (PARTITION BY ino ORDER BY n DESC) AS rn FROM versions) w
		ORDER BY w.time_ns DESC, w.ino DESC, w.n DESC`)
	if err != nil {
		return sel, err
	}
	type cand struct {
		ino, n, size int64
	}
	var walk []cand // versions the byte budget decides, newest first
	for rows.Next() {
		var ino, n, ns, rn, size int64
		var alive, atCheckpoint bool
		if err := rows.Scan(&ino, &n, &ns, &rn, &size, &alive, &atCheckpoint); err != nil {
			rows.Close()
			return sel, err
		}
		if atCheckpoint || (rn == 1 && (alive || keepDeleted || held.has(ino))) {
			continue
		}
		if (r.Versions > 0 && rn > r.Versions) || (cutoff > 0 && ns < cutoff) {
			sel.keys = append(sel.keys, [2]int64{ino, n})
			continue
		}
		if budget > 0 {
			walk = append(walk, cand{ino, n, size})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return sel, err
	}
	if len(walk) == 0 {
		return sel, nil
	}
	// What history alone holds is what the kept rows do not: count each
	// chunk once, at its span, from the newest version on.
	cond, args := unpinnedRows("inodes", nil, false)
	counted, err := hashesIn(ctx, q, sqlQuery{sql: "SELECT chunks FROM inodes WHERE kind = 1 AND NOT (" + cond + ")", args: args})
	if err != nil {
		return sel, err
	}
	var used int64
	for i, c := range walk {
		var chunks []byte
		if err := q.QueryRowContext(ctx, "SELECT chunks FROM versions WHERE ino = ? AND n = ?", c.ino, c.n).Scan(&chunks); err != nil {
			return sel, err
		}
		var add int64
		fresh := map[string]struct{}{}
		for j := 0; j+hashLen <= len(chunks); j += hashLen {
			h := string(chunks[j : j+hashLen])
			if h == string(zeroHash) {
				continue
			}
			if _, ok := counted[h]; ok {
				continue
			}
			if _, ok := fresh[h]; ok {
				continue
			}
			fresh[h] = struct{}{}
			add += min(int64(ChunkSize), c.size-int64(j/hashLen)*ChunkSize)
		}
		if used+add > budget {
			for _, o := range walk[i:] {
				sel.keys = append(sel.keys, [2]int64{o.ino, o.n})
			}
			break
		}
		used += add
		for h := range fresh {
			counted[h] = struct{}{}
		}
	}
	return sel, nil
}

// otherWriterMount reports whether a live process other than this one
// holds the vault's writer mount.
func otherWriterMount(ctx context.Context, q querier) (bool, error) {
	h, err := lockHolder(ctx, q, LockMount)
	if err != nil || h == nil {
		return false, err
	}
	return !(h.PID == os.Getpid() && h.Host == hostname()) && h.alive(), nil
}

// retain runs a retention pass in t (see Retention): it removes the
// versions selectRetention selects, the inode and directory-entry rows no
// checkpoint, fork or mark needs, and the chunks that only those referred
// to; then it sets when the next pass is due. It writes an audit row when
// it removed anything.
func (t *txn) retain() (RetainResult, error) {
	var res RetainResult
	ctx := t.ctx
	other, err := otherWriterMount(ctx, t.tx)
	if err != nil {
		return res, err
	}
	sel, err := t.v.selectRetention(ctx, t.tx, t.st, t.now, other)
	if err != nil {
		return res, err
	}
	// The chunks that may now be unreferenced: those of the versions and
	// rows removed.
	maybe := map[string]struct{}{}
	addHashes := func(b []byte) {
		for i := 0; i+hashLen <= len(b); i += hashLen {
			maybe[string(b[i:i+hashLen])] = struct{}{}
		}
	}
	for _, k := range sel.keys {
		var chunks []byte
		if err := t.tx.QueryRowContext(ctx, "DELETE FROM versions WHERE ino = ? AND n = ? RETURNING chunks", k[0], k[1]).Scan(&chunks); err != nil {
			return res, err
		}
		addHashes(chunks)
	}
	res.Versions = int64(len(sel.keys))
	for _, tbl := range []string{"inodes", "dentries"} {
		cond, args := unpinnedRows(tbl, nil, false)
		if tbl == "inodes" {
			rows, err := t.tx.QueryContext(ctx, "SELECT chunks FROM inodes WHERE kind = 1 AND "+cond, args...)
			if err != nil {
				return res, err
			}
			for rows.Next() {
				var b []byte
				if err := rows.Scan(&b); err != nil {
					rows.Close()
					return res, err
				}
				addHashes(b)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return res, err
			}
		}
		r, err := t.tx.ExecContext(ctx, "DELETE FROM "+tbl+" WHERE "+cond, args...)
		if err != nil {
			return res, err
		}
		n, _ := r.RowsAffected()
		res.Rows += n
	}
	delete(maybe, string(zeroHash))
	if len(maybe) > 0 {
		refs, err := hashesIn(ctx, t.tx, sqlQuery{sql: "SELECT chunks FROM inodes WHERE kind = 1"}, sqlQuery{sql: "SELECT chunks FROM versions WHERE kind = 1"})
		if err != nil {
			return res, err
		}
		// A writer's staged chunks are referenced too (see StageChunks).
		if err := stagedHashes(ctx, t.tx, refs); err != nil {
			return res, err
		}
		for h := range maybe {
			if _, ok := refs[h]; ok {
				continue
			}
			var size int64
			err := t.tx.QueryRowContext(ctx, "DELETE FROM chunks WHERE hash = ? RETURNING size", []byte(h)).Scan(&size)
			if err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					continue // a fork's chunk its parent holds
				}
				return res, err
			}
			res.Chunks++
			res.BytesFreed += size
		}
	}
	t.st.chunkBytes -= res.BytesFreed
	t.st.retainAt = t.st.chunkBytes + retentionSlack(t.st)
	if res.Versions > 0 {
		t.forgetVersions = true
	}
	if res.Versions > 0 || res.Rows > 0 || res.Chunks > 0 {
		t.audit("retain", "/", map[string]any{"versions_removed": res.Versions, "rows_removed": res.Rows, "chunks_removed": res.Chunks, "bytes_freed": res.BytesFreed})
	}
	return res, nil
}

// Retain runs a retention pass now, in one write transaction (see
// Retention): it fails with vault_busy like any write, and with the
// context's error when cancelled, in which case nothing was removed. It
// never removes a version the rules keep, a checkpoint, or data a live
// file, checkpoint, fork or mark needs, and it does not shrink the file
// (the pages it frees are reused by later writes; gc vacuums).
func (v *Vault) Retain(ctx context.Context) (RetainResult, error) {
	var res RetainResult
	var pass *txn
	err := v.update(ctx, "retain history", func(t *txn) error {
		var err error
		res, err = t.retain()
		pass = t
		return err
	})
	if err == nil {
		// The pass's own audit row, if any, is in the head it committed.
		v.passHead.Store(pass.st.auditID + 1)
	}
	return res, err
}

// changedSincePass reports whether the vault may hold something for a
// retention pass that this Vault's last pass (or StartRetention) did not
// see: an audited change since, by any process (every change of the tree,
// of the retention settings and of checkpoints is audited; taking and
// releasing a lock, which the mount does, removes no history and does not
// count), a pass due, or no pass known. A failed read says yes. Cost: one
// read transaction and a range scan of the audit rows since.
func (v *Vault) changedSincePass(ctx context.Context) bool {
	head := v.passHead.Load()
	if head == 0 {
		return true
	}
	changed := true
	_ = v.view(ctx, "retain history", func(q querier, st state) error {
		if retentionDue(st) {
			return nil
		}
		return q.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM audit WHERE id >= ? AND op NOT IN ('lock', 'unlock'))", head).Scan(&changed)
	})
	return changed
}

// RetainIfDue runs a retention pass when one is due (the stored bytes grew
// by the slack since the last) and reports whether it ran; a pass already
// running in this process's background is waited for instead of doubled.
// Then, pass or not, it gives free pages back to the file system when they
// are a good part of the file (see compactIfSparse): the end of a run is
// when the vault goes quiet.
func (v *Vault) RetainIfDue(ctx context.Context) (RetainResult, bool, error) {
	v.retainMu.Lock()
	defer v.retainMu.Unlock()
	var due bool
	if err := v.view(ctx, "retain history", func(_ querier, st state) error {
		due = retentionDue(st)
		return nil
	}); err != nil {
		return RetainResult{}, false, err
	}
	var res RetainResult
	if due {
		var err error
		if res, err = v.Retain(ctx); err != nil {
			return res, false, err
		}
	}
	_, err := v.compactIfSparse(ctx, runCompactPages)
	return res, due, err
}

// runCompactPages bounds what the end of one run gives back (8 MiB of 4
// KiB pages, some 160 ms of moving pages here), so that a run after a big
// delete does not wait seconds for it; the next runs, an unmount or gc
// give back the rest.
const runCompactPages = 2048

// Free pages are given back to the file system once they are at least
// compactMinBytes and an eighth of the file.
const compactMinBytes = 8 << 20

// compactIfSparse shrinks the vault file when its free pages (those that
// deleted rows and chunks left) are at least compactMinBytes and an eighth
// of the file, and returns how many pages it gave back: all of them, or at
// most limit when limit > 0.
//
// SQLite reuses free pages for later writes but never shrinks the file by
// itself: after a tree was deleted and its history retained away, the file
// would stay at its largest. Vaults are made with auto_vacuum=INCREMENTAL
// (an older vault converts at gc's VACUUM), so PRAGMA incremental_vacuum
// moves the pages at the end of the file into the free ones and truncates
// it. Cost: one write transaction that writes every moved page (about 20
// ms per MiB moved here), so it runs when the vault goes quiet (the end of
// a run, the close of a mount's vault), not after every pass. It changes
// no row: nothing is audited.
func (v *Vault) compactIfSparse(ctx context.Context, limit int64) (int64, error) {
	sparse := func(q querier) (bool, error) {
		var av, free, pages, size int64
		for _, p := range []struct {
			pragma string
			dst    *int64
		}{{"auto_vacuum", &av}, {"freelist_count", &free}, {"page_count", &pages}, {"page_size", &size}} {
			if err := q.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(p.dst); err != nil {
				return false, err
			}
		}
		return av == 2 && free*size >= compactMinBytes && free*8 >= pages, nil
	}
	var worth bool
	if err := v.view(ctx, "compact vault", func(q querier, _ state) error {
		var err error
		worth, err = sparse(q)
		return err
	}); err != nil || !worth {
		return 0, err
	}
	var moved int64
	err := v.update(ctx, "compact vault", func(t *txn) error {
		if ok, err := sparse(t.tx); err != nil || !ok {
			return err
		}
		// Each row is one page given back.
		rows, err := t.tx.QueryContext(ctx, fmt.Sprintf("PRAGMA incremental_vacuum(%d)", max(limit, 0)))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			moved++
		}
		return rows.Err()
	})
	return moved, err
}

// StartRetention makes this Vault run retention passes in the background
// of this process, one at a time, whenever a write transaction leaves one
// due; the process serving a mount calls it, so history stays bounded
// during long runs without anyone waiting for it. Writes wait for a pass
// like for any transaction. Close stops it (a pass cut short removes
// nothing). Calling it again is a no-op; errors of a pass are kept for
// RetentionError and the next pass tries again.
func (v *Vault) StartRetention() {
	// Where the audit chain stands now: Close runs its last pass only
	// if something was changed since (or a pass ran since).
	var head int64
	if err := v.view(context.Background(), "retain history", func(_ querier, st state) error {
		head = st.auditID + 1
		return nil
	}); err != nil {
		head = 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.bg != nil || v.closed {
		return
	}
	v.passHead.CompareAndSwap(0, head)
	ctx, cancel := context.WithCancel(context.Background())
	bg := &retainLoop{kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	v.bg = bg
	go func() {
		defer close(bg.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-bg.kick:
			}
			_, _, err := v.RetainIfDue(ctx)
			bg.mu.Lock()
			bg.passes++
			bg.err = err
			bg.mu.Unlock()
		}
	}()
}

// retainLoop is the background retention of a Vault (StartRetention).
type retainLoop struct {
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	passes int64
	err    error
}

// RetentionError returns the error of the last background pass, if any,
// and how many passes have run.
func (v *Vault) RetentionError() (passes int64, err error) {
	v.mu.Lock()
	bg := v.bg
	v.mu.Unlock()
	if bg == nil {
		return 0, nil
	}
	bg.mu.Lock()
	defer bg.mu.Unlock()
	return bg.passes, bg.err
}

// kickRetention wakes the background retention, if started, after a
// commit that left st with a pass due. It never blocks.
func (v *Vault) kickRetention(st state) {
	if !retentionDue(st) {
		return
	}
	v.mu.Lock()
	bg := v.bg
	v.mu.Unlock()
	if bg == nil {
		return
	}
	select {
	case bg.kick <- struct{}{}:
	default:
	}
}

// stopRetention stops the background retention, if started, waits for
// it, and reports whether it was started.
func (v *Vault) stopRetention() bool {
	v.mu.Lock()
	bg := v.bg
	v.bg = nil
	v.mu.Unlock()
	if bg == nil {
		return false
	}
	bg.cancel()
	<-bg.done
	return true
}
