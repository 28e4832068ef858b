package vault

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"math"
	"time"

	"avfs/wire"
)

// Version is one recorded state of a file. The latest version of a live
// file is its current content.
type Version struct {
	N         int64         `json:"version"`
	Path      string        `json:"path"`
	PathB64   string        `json:"path_b64,omitempty"` // wire.B64 of Path
	Op        string        `json:"op"`                 // create, write, truncate, chmod, delete, revert, restore, copy, import
	Time      time.Time     `json:"time"`
	Kind      Kind          `json:"kind"`
	Mode      wire.FileMode `json:"mode"` // "0644" in JSON
	Size      int64         `json:"size"`
	Target    string        `json:"target,omitempty"`
	TargetB64 string        `json:"target_b64,omitempty"` // wire.B64 of Target
	ino       int64
	chunks    []byte
}

// recordVersion appends in's state to its history, named dir/name.
func (t *txn) recordVersion(in *inode, dir int64, name, op string) error {
	path, err := t.childPath(dir, name)
	if err != nil {
		return err
	}
	return t.recordVersionAt(in, path, op)
}

// recordVersionAt appends in's state to its history unless the latest
// version already holds exactly that state. path "" means in's live path.
func (t *txn) recordVersionAt(in *inode, path, op string) error {
	if in.kind == KindDir {
		return nil
	}
	var n int64
	var last *Version
	var err error
	if in.fresh && in.lastVersion == 0 {
		// A file created in this transaction has no history yet.
	} else if in.lastVersion > 0 {
		n = in.lastVersion
	} else if lv, ok := t.newestVersion(in.ino); ok {
		if lv.N > 0 {
			last, n = &lv, lv.N
		}
	} else {
		row := t.tx.QueryRowContext(t.ctx, "SELECT n, op, kind, mode, size, target, chunks FROM versions WHERE ino = ? ORDER BY n DESC LIMIT 1", in.ino)
		var lv Version
		err = row.Scan(&lv.N, &lv.Op, &lv.Kind, &lv.Mode, &lv.Size, &lv.Target, &lv.chunks)
		switch {
		case err == nil:
			last, n = &lv, lv.N
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		t.noteVersion(in.ino, lv) // N 0: the file has no history
	}
	if last != nil && (last.Op == "delete") == (op == "delete") && last.Kind == in.kind && uint32(last.Mode) == in.mode &&
		last.Size == in.size && last.Target == in.target && bytes.Equal(last.chunks, in.chunks) {
		return nil
	}
	if path == "" {
		if path, err = t.inoPath(in.ino); err != nil {
			return err
		}
	}
	_, err = t.tx.ExecContext(t.ctx, "INSERT INTO versions (ino, n, path, op, time_ns, kind, mode, size, target, chunks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		in.ino, n+1, path, op, t.now, in.kind, in.mode, in.size, in.target, in.chunks)
	if err != nil {
		return err
	}
	if in.fresh {
		in.lastVersion = n + 1
	}
	t.noteVersion(in.ino, Version{N: n + 1, Op: op, Kind: in.kind, Mode: wire.FileMode(in.mode), Size: in.size, Target: in.target, chunks: bytes.Clone(in.chunks)})
	return nil
}

// historyIno finds the inode whose history PATH names: the live file at
// path, else the file last deleted at that path.
func (v *Vault) historyIno(ctx context.Context, q querier, path string) (int64, error) {
	if ino, err := v.resolve(ctx, q, path, false); err == nil {
		return ino, nil
	} else if !wire.HasCode(err, wire.CodeNotFound) {
		return 0, err
	}
	var ino int64
	err := q.QueryRowContext(ctx, "SELECT ino FROM versions WHERE path = ? AND op = 'delete' ORDER BY time_ns DESC, n DESC LIMIT 1", path).Scan(&ino)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, wire.Errorf(wire.CodeNotFound, "%s: no such file and no history", path).With("path", path)
	}
	return ino, err
}

// Log returns the versions of the file at path, oldest first.
func (v *Vault) Log(ctx context.Context, path string) ([]Version, error) {
	path, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	var out []Version
	err = v.view(ctx, "log "+path, func(q querier, _ state) error {
		ino, err := v.historyIno(ctx, q, path)
		if err != nil {
			return err
		}
		out, err = versionsOf(ctx, q, ino)
		return err
	})
	return out, err
}

func versionsOf(ctx context.Context, q querier, ino int64) ([]Version, error) {
	rows, err := q.QueryContext(ctx, "SELECT n, path, op, time_ns, kind, mode, size, target, chunks FROM versions WHERE ino = ? ORDER BY n", ino)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Version{}
	for rows.Next() {
		var ver Version
		var ns int64
		if err := rows.Scan(&ver.N, &ver.Path, &ver.Op, &ns, &ver.Kind, &ver.Mode, &ver.Size, &ver.Target, &ver.chunks); err != nil {
			return nil, err
		}
		ver.Time, ver.ino = time.Unix(0, ns), ino
		ver.PathB64, ver.TargetB64 = wire.B64(ver.Path), wire.B64(ver.Target)
		out = append(out, ver)
	}
	return out, rows.Err()
}

func pickVersion(vs []Version, n int64, path string) (Version, error) {
	for _, ver := range vs {
		if ver.N == n {
			return ver, nil
		}
	}
	return Version{}, wire.Errorf(wire.CodeVersionNotFound, "%s has no version %d", path, n).With("path", path).With("version", n)
}

// ReadVersion writes version n of the file at path to w, streaming as
// ReadFile does; it fails as OpenVersion does before writing anything.
func (v *Vault) ReadVersion(ctx context.Context, path string, n int64, w io.Writer) (int64, error) {
	r, err := v.OpenVersion(ctx, path, n)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return r.WriteTo(w)
}

// Revert makes version to (0: the one before the latest) the file's current
// state, as a new version. A deleted file is brought back at its last path.
func (v *Vault) Revert(ctx context.Context, path string, to int64) (Version, error) {
	path, err := CleanPath(path)
	if err != nil {
		return Version{}, err
	}
	var result Version
	err = v.update(ctx, "revert "+path, func(t *txn) error {
		ino, err := v.historyIno(ctx, t.tx, path)
		if err != nil {
			return err
		}
		vs, err := versionsOf(ctx, t.tx, ino)
		if err != nil {
			return err
		}
		if len(vs) == 0 {
			return wire.Errorf(wire.CodeVersionNotFound, "%s has no history", path)
		}
		if to == 0 {
			// The version before the latest that has content.
			for i := len(vs) - 2; i >= 0; i-- {
				if vs[i].Op != "delete" {
					to = vs[i].N
					break
				}
			}
			if to == 0 {
				return wire.Errorf(wire.CodeVersionNotFound, "%s has no earlier version to revert to", path)
			}
		}
		ver, err := pickVersion(vs, to, path)
		if err != nil {
			return err
		}
		if ver.Op == "delete" {
			return wire.Errorf(wire.CodeVersionNotFound, "version %d of %s records its deletion; pick a version with content", to, path)
		}
		in, err := getInode(ctx, t.tx, ino)
		if wire.HasCode(err, wire.CodeNotFound) {
			// Deleted: bring it back under the path of the latest version.
			target := vs[len(vs)-1].Path
			dir, name, derr := v.resolveParent(ctx, t.tx, target)
			if derr != nil {
				return derr
			}
			dirIn, derr := t.dirInode(dir)
			if derr != nil {
				return derr
			}
			if _, _, ok, _ := lookupDentry(ctx, t.tx, dir, name); ok {
				return wire.Errorf(wire.CodeAlreadyExists, "%s exists; move it away to bring the old file back", target)
			}
			in = &inode{ino: ino, kind: ver.Kind, mode: uint32(ver.Mode), uid: uint32(uidNow()), gid: uint32(gidNow()), nlink: 1, mtime: t.now, ctime: t.now, atime: t.now, chunks: []byte{}, xattrs: []byte{}}
			in.size, in.chunks, in.target = ver.Size, ver.chunks, ver.Target
			if err := t.checkGrowth(in, in.size); err != nil {
				return err
			}
			if err := t.saveInode(in); err != nil {
				return err
			}
			if err := t.setDentry(dir, name, ino); err != nil {
				return err
			}
			if err := t.touchDir(dirIn); err != nil {
				return err
			}
			path = target
		} else if err != nil {
			return err
		} else {
			if in.kind != ver.Kind {
				return wire.Errorf(wire.CodeInvalidInput, "%s is now a %s; version %d is a %s", path, in.kind, to, ver.Kind)
			}
			if err := t.checkGrowth(in, ver.Size); err != nil {
				return err
			}
			in.mode, in.size, in.chunks, in.target = uint32(ver.Mode), ver.Size, ver.chunks, ver.Target
			in.mtime, in.ctime = t.now, t.now
			if err := t.saveInode(in); err != nil {
				return err
			}
		}
		if err := t.recordVersionAt(in, path, "revert"); err != nil {
			return err
		}
		t.audit("revert", path, map[string]any{"to_version": to})
		all, err := versionsOf(ctx, t.tx, ino)
		if err != nil {
			return err
		}
		result = all[len(all)-1]
		return nil
	})
	return result, err
}

// PruneOptions says which versions Prune removes. A version is removed
// only when every rule given says so: it is not among the newest Keep of
// its file, and it is older than OlderThan. The newest version of every
// file (its current content, or its deletion) is always kept, and so is a
// version that holds the state of the file at a checkpoint.
type PruneOptions struct {
	Keep      int64         // versions kept per file, newest first (0: not given)
	OlderThan time.Duration // versions younger than this are kept (0: not given)
	DryRun    bool          // select and report, remove nothing
}

// PruneResult says what Prune removed, or with DryRun would remove.
type PruneResult struct {
	Versions int64                // versions removed
	Bytes    int64                // the sum of their sizes
	Removed  []wire.PrunedVersion // them, by file (inode) then version; never nil
}

// Prune removes old versions of every file, as opts says; chunks they
// alone used are freed by GC. It fails with invalid_input when neither
// rule is given or one is negative. With DryRun it changes nothing and
// returns what it would remove. Both runs select with prunable.
func (v *Vault) Prune(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	var res PruneResult
	if opts.Keep < 0 || opts.OlderThan < 0 || (opts.Keep == 0 && opts.OlderThan == 0) {
		return res, wire.Errorf(wire.CodeInvalidInput, "prune: give --keep N (at least 1) or --older-than DURATION")
	}
	if opts.DryRun {
		err := v.view(ctx, "prune history", func(q querier, _ state) error {
			keys, list, err := prunable(ctx, q, opts, time.Now())
			res.Versions, res.Removed = int64(len(keys)), list
			for _, p := range list {
				res.Bytes += p.Size
			}
			return err
		})
		return res, err
	}
	err := v.update(ctx, "prune history", func(t *txn) error {
		keys, list, err := prunable(ctx, t.tx, opts, time.Unix(0, t.now))
		if err != nil {
			return err
		}
		for i, k := range keys {
			if _, err := t.tx.ExecContext(ctx, "DELETE FROM versions WHERE ino = ? AND n = ?", k[0], k[1]); err != nil {
				return err
			}
			res.Bytes += list[i].Size
		}
		res.Versions, res.Removed = int64(len(keys)), list
		details := map[string]any{"versions_removed": res.Versions}
		if opts.Keep > 0 {
			details["keep"] = opts.Keep
		}
		if opts.OlderThan > 0 {
			details["older_than_s"] = int64(opts.OlderThan / time.Second)
		}
		t.audit("prune", "/", details)
		return nil
	})
	return res, err
}

// prunable selects, read in q, the versions Prune removes as of now (see
// PruneOptions): their keys (ino, n) and, in the same order, what the
// result lists of them. A version holds a file's state at a checkpoint
// when the inode row visible at the checkpoint's generation has its kind,
// mode, size, target and content map.
func prunable(ctx context.Context, q querier, opts PruneOptions, now time.Time) ([][2]int64, []wire.PrunedVersion, error) {
	keep := max(opts.Keep, 1)
	cutoff := int64(math.MaxInt64)
	if opts.OlderThan > 0 {
		cutoff = now.Add(-opts.OlderThan).UnixNano()
	}
	rows, err := q.QueryContext(ctx, `SELECT v.ino, v.n, v.path, v.op, v.time_ns, v.size FROM
		(SELECT ino, n, path, op, time_ns, kind, mode, size, target, chunks,
			ROW_NUMBER() OVER (PARTITION BY ino ORDER BY n DESC) AS rn FROM versions) v
		WHERE v.rn > ? AND v.time_ns < ?
		AND NOT EXISTS (SELECT 1 FROM checkpoints c JOIN inodes i ON i.ino = v.ino AND i.gen_from <= c.gen AND i.gen_to > c.gen
			WHERE i.kind = v.kind AND i.mode = v.mode AND i.size = v.size AND i.target = v.target AND i.chunks = v.chunks)
		ORDER BY v.ino, v.n`, keep, cutoff)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var keys [][2]int64
	list := []wire.PrunedVersion{}
	for rows.Next() {
		var k [2]int64
		var p wire.PrunedVersion
		var ns int64
		if err := rows.Scan(&k[0], &k[1], &p.Path, &p.Op, &ns, &p.Size); err != nil {
			return nil, nil, err
		}
		p.PathB64, p.Version, p.Time = wire.B64(p.Path), k[1], time.Unix(0, ns).UTC()
		keys, list = append(keys, k), append(list, p)
	}
	return keys, list, rows.Err()
}
