package vault

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"

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

// Err returns an integrity_failed error when the report has problems.
func (r AuditReport) Err() error { return auditError(r) }

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
			sum := sha256.Sum256(data)
			if !bytes.Equal(sum[:], h) || int64(len(data)) != size {
				add("chunk_hash", "chunk content does not match its hash or size", fmt.Sprintf("%x", h[:8]))
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
				add("chunk_missing", "a borrowed chunk is not in the fork's ancestors: "+err.Error(), fmt.Sprintf("%x", h[:8]))
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
		problems, _, err := verifyAuditChain(ctx, q, st)
		if err != nil {
			return err
		}
		rep.Problems = append(rep.Problems, problems...)
		return nil
	})
	rep.OK = err == nil && len(rep.Problems) == 0
	return rep, err
}

// GCResult says what GC removed.
type GCResult struct {
	Rows       int64 `json:"rows_removed"`
	Chunks     int64 `json:"chunks_removed"`
	BytesFreed int64 `json:"bytes_freed"`
	FileBefore int64 `json:"file_size_before"`
	FileAfter  int64 `json:"file_size_after"`
	// ForksReleased counts the pins of forks that never completed (killed
	// while being made) released first, FilesRemoved the temporary files
	// of such forks removed from the vaults directory.
	ForksReleased int64 `json:"forks_released"`
	FilesRemoved  int64 `json:"fork_files_removed"`
	// MarksReleased counts the marks runs that were killed left, dropped
	// with their pins of checkpoints (none while a run is under way).
	MarksReleased int64 `json:"marks_released"`
}

// GC removes metadata rows that no checkpoint or fork needs and chunks that
// nothing refers to: not the live state, checkpoints, history, or the
// states that live forks borrow. It then truncates the WAL.
//
// It first releases the pins of forks that never completed and removes
// their temporary files (recoverForks), so that what they pinned is freed;
// forks under way in another process and completed forks keep theirs. The
// marks of runs that were killed go too (a run under way keeps its own);
// no checkpoint is deleted.
func (v *Vault) GC(ctx context.Context) (GCResult, error) {
	var res GCResult
	rec, err := v.recoverForks(ctx)
	res.ForksReleased, res.FilesRemoved = int64(len(rec.Released)), int64(rec.FilesRemoved)
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	before, _ := v.Info(ctx)
	res.FileBefore = before.FileSize
	err = v.update(ctx, "gc", func(t *txn) error {
		var rowsBefore, rowsAfter int64
		count := func(n *int64) error {
			return t.tx.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM inodes) + (SELECT COUNT(*) FROM dentries)").Scan(n)
		}
		if err := count(&rowsBefore); err != nil {
			return err
		}
		_, marks, err := releaseDeadMarks(t)
		if err != nil {
			return err
		}
		res.MarksReleased = int64(marks)
		if err := dropUnpinnedRows(ctx, t.tx, 0); err != nil {
			return err
		}
		if err := count(&rowsAfter); err != nil {
			return err
		}
		res.Rows = rowsBefore - rowsAfter
		refs, err := referencedHashes(ctx, t.tx)
		if err != nil {
			return err
		}
		rows, err := t.tx.QueryContext(ctx, "SELECT id, hash, size FROM chunks")
		if err != nil {
			return err
		}
		var drop []int64
		for rows.Next() {
			var id, size int64
			var h []byte
			if err := rows.Scan(&id, &h, &size); err != nil {
				rows.Close()
				return err
			}
			if _, ok := refs[string(h)]; !ok {
				drop = append(drop, id)
				res.BytesFreed += size
			}
		}
		rows.Close()
		for _, id := range drop {
			if _, err := t.tx.ExecContext(ctx, "DELETE FROM chunks WHERE id = ?", id); err != nil {
				return err
			}
		}
		res.Chunks = int64(len(drop))
		t.audit("gc", "/", map[string]any{"rows_removed": res.Rows, "chunks_removed": res.Chunks, "bytes_freed": res.BytesFreed})
		return nil
	})
	if err != nil {
		return res, err
	}
	if _, err := v.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return res, storageErr("gc", err)
	}
	if _, err := v.db.ExecContext(ctx, "VACUUM"); err != nil && !wire.HasCode(storageErr("gc", err), wire.CodeVaultBusy) {
		return res, storageErr("gc", err)
	}
	_, _ = v.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)") // VACUUM wrote the whole file into the WAL
	after, _ := v.Info(ctx)
	res.FileAfter = after.FileSize
	return res, nil
}
