package vault

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"avfs/wire"
)

// Issue is one problem found by Check or VerifyAudit.
type Issue struct {
	Check   string `json:"check"` // which invariant: sqlite, chunk_missing, chunk_hash, size, orphan, nlink, dangling_entry, duplicate_live, counters, audit_chain
	Message string `json:"message"`
	Ref     any    `json:"ref,omitempty"` // the row concerned (inode, chunk, audit id)
}

// CheckReport is the result of Check.
type CheckReport struct {
	OK       bool    `json:"ok"`
	Inodes   int64   `json:"inodes"`
	Chunks   int64   `json:"chunks"`
	Problems []Issue `json:"problems"`
}

// Err returns an integrity_failed error when the report has problems.
func (r CheckReport) Err() error {
	if r.OK {
		return nil
	}
	return wire.Errorf(wire.CodeIntegrity, "vault check found %d problem(s)", len(r.Problems)).With("problems", r.Problems)
}

// Check runs SQLite's integrity check and the vault's own invariants: every
// referenced chunk exists (here or in a fork's ancestors), stored chunks
// match their hashes, sizes match content maps, every live entry names a
// live inode and every live inode is named, link counts and the usage
// counters are right, and the audit chain is intact.
func (v *Vault) Check(ctx context.Context) (CheckReport, error) {
	rep := CheckReport{Problems: []Issue{}}
	add := func(check, msg string, ref any) {
		rep.Problems = append(rep.Problems, Issue{Check: check, Message: msg, Ref: ref})
	}
	err := v.view(ctx, "check vault", func(q querier, st state) error {
		rows, err := q.QueryContext(ctx, "PRAGMA integrity_check")
		if err != nil {
			return err
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return err
			}
			if s != "ok" {
				add("sqlite", s, nil)
			}
		}
		rows.Close()
		// Stored chunks match their hashes.
		rows, err = q.QueryContext(ctx, "SELECT hash, size, data FROM chunks")
		if err != nil {
			return err
		}
		for rows.Next() {
			var h, data []byte
			var size int64
			if err := rows.Scan(&h, &size, &data); err != nil {
				rows.Close()
				return err
			}
			rep.Chunks++
			if why := chunkFault(h, size, data); why != "" {
				add("chunk_hash", "chunk content does not match its hash or size: "+why, fmt.Sprintf("%x", h[:8]))
			}
		}
		rows.Close()
		// Referenced chunks exist.
		refs, err := referencedHashes(ctx, q)
		if err != nil {
			return err
		}
		for h := range refs {
			var one int
			if err := q.QueryRowContext(ctx, "SELECT 1 FROM chunks WHERE hash = ?", []byte(h)).Scan(&one); err == nil {
				continue
			}
			if st.parentName == "" {
				add("chunk_missing", "a content map refers to a chunk that is not stored", fmt.Sprintf("%x", h[:8]))
				continue
			}
			if _, err := v.chunkData(ctx, q, []byte(h)); err != nil {
				add("chunk_missing", "a borrowed chunk is not in the fork's ancestors, or is damaged there: "+err.Error(), fmt.Sprintf("%x", h[:8]))
			}
		}
		// Sizes match content maps; live inodes are named; link counts.
		rows, err = q.QueryContext(ctx, "SELECT "+inodeCols+" FROM inodes WHERE gen_to = ?", live)
		if err != nil {
			return err
		}
		var files, bytesTotal int64
		var live_ []*inode
		for rows.Next() {
			in, err := scanInode(rows)
			if err != nil {
				rows.Close()
				return err
			}
			live_ = append(live_, in)
		}
		rows.Close()
		for _, in := range live_ {
			rep.Inodes++
			if in.ino != rootIno {
				files++
			}
			switch in.kind {
			case KindFile:
				bytesTotal += in.size
				if len(in.chunks)%hashLen != 0 || int64(len(in.chunks)/hashLen) > (in.size+ChunkSize-1)/ChunkSize {
					add("size", fmt.Sprintf("content map has %d chunks for %d bytes", len(in.chunks)/hashLen, in.size), in.ino)
				}
			case KindSymlink:
				if in.size != int64(len(in.target)) {
					add("size", "symlink size does not match its target", in.ino)
				}
			case KindFifo, KindSocket:
				if in.size != 0 || len(in.chunks) != 0 || in.target != "" {
					add("size", fmt.Sprintf("%s has content", in.kind), in.ino)
				}
			case KindCharDev, KindBlockDev:
				if in.size != 0 || len(in.chunks) != 0 {
					add("size", fmt.Sprintf("%s has content", in.kind), in.ino)
				}
				if _, err := strconv.ParseUint(in.target, 10, 64); err != nil {
					add("kind", fmt.Sprintf("%s has no device number (%q)", in.kind, in.target), in.ino)
				}
			case KindDir:
			default:
				add("kind", fmt.Sprintf("unknown inode kind %d", in.kind), in.ino)
			}
			var names int64
			if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM dentries WHERE ino = ? AND gen_to = ?", in.ino, live).Scan(&names); err != nil {
				return err
			}
			if in.ino != rootIno && names == 0 {
				add("orphan", "live inode has no directory entry", in.ino)
			}
			want := names
			if in.kind == KindDir {
				var subdirs int64
				if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM dentries d JOIN inodes i ON i.ino = d.ino AND i.gen_to = ?
					WHERE d.parent = ? AND d.gen_to = ? AND i.kind = ?`, live, in.ino, live, KindDir).Scan(&subdirs); err != nil {
					return err
				}
				want = 2 + subdirs
			}
			if in.nlink != want {
				add("nlink", fmt.Sprintf("link count is %d, expected %d", in.nlink, want), in.ino)
			}
		}
		var dupInodes, dupEntries int64
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT ino FROM inodes WHERE gen_to = `+liveSQL+` GROUP BY ino HAVING COUNT(*) > 1)`).Scan(&dupInodes); err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM dentries WHERE gen_to = `+liveSQL+` GROUP BY parent, name HAVING COUNT(*) > 1)`).Scan(&dupEntries); err != nil {
			return err
		}
		if dupInodes > 0 || dupEntries > 0 {
			add("duplicate_live", fmt.Sprintf("%d inodes and %d directory entries have more than one live row", dupInodes, dupEntries), nil)
		}
		var dangling int64
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM dentries d WHERE d.gen_to = ? AND NOT EXISTS
			(SELECT 1 FROM inodes i WHERE i.ino = d.ino AND i.gen_to = ?)`, live, live).Scan(&dangling); err != nil {
			return err
		}
		if dangling > 0 {
			add("dangling_entry", fmt.Sprintf("%d directory entries name no live inode", dangling), nil)
		}
		if files != st.files || bytesTotal != st.bytes {
			add("counters", fmt.Sprintf("usage counters say %d files, %d bytes; the inodes hold %d files, %d bytes", st.files, st.bytes, files, bytesTotal), nil)
		}
		var stored int64
		if err := q.QueryRowContext(ctx, "SELECT COALESCE(SUM(size), 0) FROM chunks").Scan(&stored); err != nil {
			return err
		}
		if stored != st.chunkBytes {
			add("counters", fmt.Sprintf("the stored-bytes counter says %d; the chunks hold %d", st.chunkBytes, stored), nil)
		}
		arep, err := v.verifyAuditChain(ctx, q, st)
		if err != nil {
			return err
		}
		for _, p := range arep.Problems {
			var ref any
			if p.Row != 0 {
				ref = p.Row
			}
			rep.Problems = append(rep.Problems, Issue{Check: "audit_chain", Message: string(p.Reason) + ": " + p.Message, Ref: ref})
		}
		return nil
	})
	rep.OK = err == nil && len(rep.Problems) == 0
	return rep, err
}

// GCResult says what GC removed, or, from GCDryRun, what it would remove.
type GCResult = wire.GCCounts

// gcPlan is what gc frees, as planGC selects it.
type gcPlan struct {
	rows   int64   // inode and directory-entry rows that nothing needs
	chunks []int64 // ids of the chunks that no row kept refers to
	bytes  int64   // their stored bytes
}

// planGC selects, read in q, what gc frees: the rows unpinnedRows selects
// (taking the pins of the forks in ignorePins as released) and the chunks
// that no other row refers to: not the rows kept (live state, checkpoints,
// fork pins, marks) nor history nor a live writer's staged chunks
// (stagedHashes). It is the one selection of both GC, which
// then deletes what it returns in the same transaction, and GCDryRun,
// which only counts it. Cost: a scan of the inodes, dentries, versions and
// chunks tables, and a set of every referenced hash in memory. The
// versions in skipVersions are taken as removed (a dry run of the
// retention gc applies first).
func planGC(ctx context.Context, q querier, ignorePins []string, ignoreMarks bool, skipVersions map[[2]int64]bool) (gcPlan, error) {
	var p gcPlan
	for _, tbl := range []string{"inodes", "dentries"} {
		cond, args := unpinnedRows(tbl, ignorePins, ignoreMarks)
		var n int64
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tbl+" WHERE "+cond, args...).Scan(&n); err != nil {
			return p, err
		}
		p.rows += n
	}
	cond, args := unpinnedRows("inodes", ignorePins, ignoreMarks)
	refs, err := hashesIn(ctx, q, sqlQuery{sql: "SELECT chunks FROM inodes WHERE kind = 1 AND NOT (" + cond + ")", args: args})
	if err != nil {
		return p, err
	}
	if err := versionHashes(ctx, q, refs, skipVersions); err != nil {
		return p, err
	}
	if err := stagedHashes(ctx, q, refs); err != nil {
		return p, err
	}
	rows, err := q.QueryContext(ctx, "SELECT id, hash, size FROM chunks")
	if err != nil {
		return p, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, size int64
		var h []byte
		if err := rows.Scan(&id, &h, &size); err != nil {
			return p, err
		}
		if _, ok := refs[string(h)]; !ok {
			p.chunks = append(p.chunks, id)
			p.bytes += size
		}
	}
	return p, rows.Err()
}

// GC removes metadata rows that no checkpoint or fork needs and chunks that
// nothing refers to: not the live state, checkpoints, history, or the
// states that live forks borrow. It then truncates the WAL.
//
// It first releases the pins of forks that never completed and removes
// their temporary files (recoverForks), so that what they pinned is freed;
// forks under way in another process and completed forks keep theirs. The
// marks of runs that were killed go too (a run under way keeps its own);
// no checkpoint is deleted. What it frees is what planGC selects, in the
// transaction that frees it.
func (v *Vault) GC(ctx context.Context) (GCResult, error) { return v.GCWith(ctx, GCOptions{}) }

// GCOptions says how GC reports its work.
type GCOptions struct {
	// Progress is told the steps done (items) of gcSteps: releasing dead
	// forks' pins, freeing rows and chunks, compacting the file, and the
	// last truncation of the log. The compaction is the long one in a
	// large vault; no step reports within itself.
	Progress ProgressFunc
}

// gcSteps is the number of GC's steps, as GCOptions.Progress counts them.
const gcSteps = 4

// GCWith is GC, reporting as opt says.
func (v *Vault) GCWith(ctx context.Context, opt GCOptions) (GCResult, error) {
	step := func(n int64) { opt.Progress.report(Work{Items: n}, Work{Items: gcSteps}) }
	step(0)
	var res GCResult
	rec, err := v.recoverForks(ctx)
	res.ForksReleased, res.FilesRemoved = int64(len(rec.Released)), int64(rec.FilesRemoved)
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	step(1)
	before, _ := v.Info(ctx)
	res.FileBefore = before.FileSize
	err = v.update(ctx, "gc", func(t *txn) error {
		_, marks, err := releaseDeadMarks(t)
		if err != nil {
			return err
		}
		// The staged chunks of killed writers are no longer anyone's.
		if _, err := t.sweepStaged(); err != nil {
			return err
		}
		// Held changes whose approval expired are no longer anyone's.
		if _, err := t.dropExpiredHeld(); err != nil {
			return err
		}
		res.MarksReleased = int64(marks)
		ret, err := t.retain()
		if err != nil {
			return err
		}
		res.Versions, res.Rows, res.Chunks, res.BytesFreed = ret.Versions, ret.Rows, ret.Chunks, ret.BytesFreed
		plan, err := planGC(ctx, t.tx, nil, false, nil)
		if err != nil {
			return err
		}
		if err := dropUnpinnedRows(ctx, t.tx, 0); err != nil {
			return err
		}
		for _, id := range plan.chunks {
			if _, err := t.tx.ExecContext(ctx, "DELETE FROM chunks WHERE id = ?", id); err != nil {
				return err
			}
		}
		res.Rows, res.Chunks, res.BytesFreed = res.Rows+plan.rows, res.Chunks+int64(len(plan.chunks)), res.BytesFreed+plan.bytes
		t.st.chunkBytes -= plan.bytes
		t.st.retainAt = t.st.chunkBytes + retentionSlack(t.st)
		t.audit("gc", "/", map[string]any{"versions_removed": res.Versions, "rows_removed": res.Rows, "chunks_removed": res.Chunks, "bytes_freed": res.BytesFreed})
		return nil
	})
	if err != nil {
		return res, err
	}
	step(2)
	// A replicated vault's log is the replicator's (replica.go): VACUUM
	// goes through it, the replicator copies it back.
	if !v.replicated {
		if _, err := v.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			return res, storageErr("gc", err)
		}
	}
	if _, err := v.db.ExecContext(ctx, "VACUUM"); err != nil && !wire.HasCode(storageErr("gc", err), wire.CodeVaultBusy) {
		return res, storageErr("gc", err)
	}
	step(3)
	if !v.replicated {
		_, _ = v.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)") // VACUUM wrote the whole file into the WAL
	}
	after, _ := v.Info(ctx)
	res.FileAfter = after.FileSize
	step(gcSteps)
	return res, nil
}

// GCDryRun says what GC would free now, changing nothing: in one read
// transaction, the pins of forks that never completed that GC would
// release (deadForkPins) and what planGC would then select with those pins
// taken as released; and the temporary files of ended forks GC would
// remove. The vault file, its rows and the vaults directory are left as
// they are (it takes and drops the flocks of forks' temporary files, as a
// recovery does, to tell dead forks from live ones). Run just before GC,
// with nothing written between, its counts are GC's.
func (v *Vault) GCDryRun(ctx context.Context) (GCResult, error) {
	res := GCResult{DryRun: true}
	dir := filepath.Dir(v.path)
	info, err := v.Info(ctx)
	if err != nil {
		return res, err
	}
	res.FileBefore, res.FileAfter = info.FileSize, info.FileSize
	err = v.view(ctx, "gc dry run", func(q querier, st state) error {
		d, dead, err := deadForkPins(ctx, q, dir)
		if _, ferr := d.finish(false); err == nil {
			err = ferr
		}
		if err != nil {
			return err
		}
		ignore := make([]string, len(dead))
		for i, p := range dead {
			ignore[i] = p.uuid
		}
		// The marks of killed runs, which gc drops first, pin nothing.
		var marks int64
		run, err := runUnderWay(ctx, q)
		if err != nil {
			return err
		}
		if run == nil {
			if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM marks").Scan(&marks); err != nil {
				return err
			}
		}
		other, err := otherWriterMount(ctx, q)
		if err != nil {
			return err
		}
		sel, err := v.selectRetention(ctx, q, st, time.Now().UnixNano(), other)
		if err != nil {
			return err
		}
		skip := make(map[[2]int64]bool, len(sel.keys))
		for _, k := range sel.keys {
			skip[k] = true
		}
		res.Versions = int64(len(sel.keys))
		plan, err := planGC(ctx, q, ignore, marks > 0, skip)
		if err != nil {
			return err
		}
		res.MarksReleased = marks
		res.ForksReleased = int64(len(dead))
		res.Rows, res.Chunks, res.BytesFreed = plan.rows, int64(len(plan.chunks)), plan.bytes
		return nil
	})
	if err != nil {
		return res, err
	}
	n, err := sweepForkTmps(dir, false)
	if err != nil {
		return res, wire.Errorf(wire.CodeHostIO, "gc dry run: look at temporary files: %w", err)
	}
	res.FilesRemoved = int64(n)
	return res, nil
}

// versionHashes adds to set the chunk hashes of every version of a regular
// file but those in skip.
func versionHashes(ctx context.Context, q querier, set map[string]struct{}, skip map[[2]int64]bool) error {
	rows, err := q.QueryContext(ctx, "SELECT ino, n, chunks FROM versions WHERE kind = 1")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k [2]int64
		var b []byte
		if err := rows.Scan(&k[0], &k[1], &b); err != nil {
			return err
		}
		if skip[k] {
			continue
		}
		for i := 0; i+hashLen <= len(b); i += hashLen {
			set[string(b[i:i+hashLen])] = struct{}{}
		}
	}
	delete(set, string(zeroHash))
	return rows.Err()
}
