package vault

import (
	"context"
	"io"
	"path"
	"sort"
	"strings"

	"avfs/wire"
)

// Entry is a path with its attributes. Path, Name and Target hold the
// raw bytes; in JSON, those that are not valid UTF-8 come with their
// path_b64, name_b64 and target_b64 (wire.B64), which entryOf sets.
type Entry struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	Name    string `json:"name"`
	NameB64 string `json:"name_b64,omitempty"`
	Attr
	TargetB64 string `json:"target_b64,omitempty"`
}

func entryOf(p string, in *inode) Entry {
	name := path.Base(p)
	if p == "/" {
		name = "/"
	}
	a := in.attr()
	return Entry{Path: p, PathB64: wire.B64(p), Name: name, NameB64: wire.B64(name), Attr: a, TargetB64: wire.B64(a.Target)}
}

// Stat returns the entry at p without following a final symlink.
func (v *Vault) Stat(ctx context.Context, p string) (Entry, error) {
	p, err := CleanPath(p)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	err = v.view(ctx, "stat "+p, func(q querier, _ state) error {
		ino, err := v.resolve(ctx, q, p, false)
		if err != nil {
			return err
		}
		in, err := getInode(ctx, q, ino)
		if err != nil {
			return err
		}
		e = entryOf(p, in)
		return nil
	})
	return e, err
}

// List returns the entries of the directory at p sorted by name, or the
// entry itself when p is not a directory.
func (v *Vault) List(ctx context.Context, p string) ([]Entry, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	err = v.view(ctx, "list "+p, func(q querier, _ state) error {
		ino, err := v.resolve(ctx, q, p, true)
		if err != nil {
			return err
		}
		in, err := getInode(ctx, q, ino)
		if err != nil {
			return err
		}
		if in.kind != KindDir {
			out = append(out, entryOf(p, in))
			return nil
		}
		out, err = listDir(ctx, q, p, ino)
		return err
	})
	return out, err
}

// listDir returns the live entries of directory ino (named p), sorted by name.
func listDir(ctx context.Context, q querier, p string, ino int64) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, `SELECT d.name, `+prefixed("i.", inodeCols)+` FROM dentries d JOIN inodes i ON i.ino = d.ino AND i.gen_to = `+liveSQL+`
		WHERE d.parent = ? AND d.gen_to = `+liveSQL+` ORDER BY d.name`, ino)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var name string
		in := &inode{}
		if err := rows.Scan(&name, &in.ino, &in.genFrom, &in.kind, &in.mode, &in.uid, &in.gid, &in.size, &in.nlink,
			&in.mtime, &in.ctime, &in.atime, &in.target, &in.chunks, &in.xattrs); err != nil {
			return nil, err
		}
		out = append(out, entryOf(path.Join(p, name), in))
	}
	return out, rows.Err()
}

func prefixed(prefix, cols string) string {
	var out []byte
	start := true
	for i := 0; i < len(cols); i++ {
		if start && cols[i] != ' ' {
			out = append(out, prefix...)
			start = false
		}
		out = append(out, cols[i])
		if cols[i] == ',' {
			start = true
		}
	}
	return string(out)
}

// Walk calls fn for p and, when it is a directory, everything below it,
// parents before children, names sorted. Symlinks are not followed.
func (v *Vault) Walk(ctx context.Context, p string, fn func(Entry) error) error {
	p, err := CleanPath(p)
	if err != nil {
		return err
	}
	return v.view(ctx, "walk "+p, func(q querier, _ state) error {
		ino, err := v.resolve(ctx, q, p, false)
		if err != nil {
			return err
		}
		in, err := getInode(ctx, q, ino)
		if err != nil {
			return err
		}
		return walkTree(ctx, q, entryOf(p, in), fn)
	})
}

func walkTree(ctx context.Context, q querier, e Entry, fn func(Entry) error) error {
	if err := fn(e); err != nil {
		return err
	}
	if e.Kind != KindDir {
		return nil
	}
	children, err := listDir(ctx, q, e.Path, int64(e.Ino))
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := walkTree(ctx, q, c, fn); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile writes the content of the file at p (following symlinks) to w,
// as it was when the read began, a run of chunks at a time (see
// FileReader), and returns the number of bytes written. It fails as OpenFile
// does before writing anything; a failure later (a missing or damaged
// chunk: integrity_failed; w's own: host_io) may leave a prefix of the
// content written to w, never a byte of a chunk that failed its check.
func (v *Vault) ReadFile(ctx context.Context, p string, w io.Writer) (int64, error) {
	r, err := v.OpenFile(ctx, p)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return r.WriteTo(w)
}

// WriteOptions tune WriteFile.
type WriteOptions struct {
	Mode    uint32 // permission bits of a new file (default 0644)
	Append  bool   // append instead of replacing the content
	Parents bool   // create missing parent directories
}

// WriteFile replaces (or appends to) the content of the file at p with
// everything read from r, creating it if needed, in one transaction.
func (v *Vault) WriteFile(ctx context.Context, p string, r io.Reader, opts WriteOptions) (Entry, error) {
	p, err := CleanPath(p)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	err = v.update(ctx, "write "+p, func(t *txn) error {
		in, created, err := v.openForWrite(t, p, opts)
		if err != nil {
			return err
		}
		if opts.Append {
			buf := make([]byte, ChunkSize)
			for {
				n, rerr := io.ReadFull(r, buf)
				if n > 0 {
					if err := t.writeAt(in, buf[:n], in.size); err != nil {
						return err
					}
				}
				if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
					break
				}
				if rerr != nil {
					return wire.Errorf(wire.CodeHostIO, "read content: %w", rerr)
				}
			}
		} else if err := t.writeAll(in, r); err != nil {
			return err
		}
		if err := t.saveInode(in); err != nil {
			return err
		}
		op := "write"
		if created {
			op = "create"
		}
		if err := t.recordVersionAt(in, p, op); err != nil {
			return err
		}
		t.audit("write", p, map[string]any{"size": in.size, "created": created, "append": opts.Append})
		e = entryOf(p, in)
		return nil
	})
	return e, err
}

// openForWrite returns the file at p (following symlinks), creating it.
func (v *Vault) openForWrite(t *txn, p string, opts WriteOptions) (*inode, bool, error) {
	ino, err := v.resolve(t.ctx, t.tx, p, true)
	if err == nil {
		in, err := getInode(t.ctx, t.tx, ino)
		if err != nil {
			return nil, false, err
		}
		if in.kind == KindDir {
			return nil, false, wire.Errorf(wire.CodeIsDir, "%s is a directory", p).With("path", p)
		}
		if in.kind.special() {
			return nil, false, wire.Errorf(wire.CodeInvalidInput, "%s is a %s: it cannot hold content", p, in.kind).With("path", p)
		}
		return in, false, nil
	}
	if !wire.HasCode(err, wire.CodeNotFound) {
		return nil, false, err
	}
	if opts.Parents {
		if _, err := v.mkdirAll(t, path.Dir(p), 0o755); err != nil {
			return nil, false, err
		}
	}
	dirIno, name, err := v.resolveParent(t.ctx, t.tx, p)
	if err != nil {
		return nil, false, err
	}
	dir, err := t.dirInode(dirIno)
	if err != nil {
		return nil, false, err
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o644
	}
	in := t.newInode(KindFile, mode, uint32(uidNow()), uint32(gidNow()), "")
	if err := t.saveInode(in); err != nil {
		return nil, false, err
	}
	if err := t.setDentry(dir.ino, name, in.ino); err != nil {
		return nil, false, err
	}
	return in, true, t.touchDir(dir)
}

// Mkdir makes a directory at p; with parents, missing parents too and no
// error when it exists.
func (v *Vault) Mkdir(ctx context.Context, p string, mode uint32, parents bool) (Entry, error) {
	p, err := CleanPath(p)
	if err != nil {
		return Entry{}, err
	}
	if mode == 0 {
		mode = 0o755
	}
	var e Entry
	err = v.update(ctx, "mkdir "+p, func(t *txn) error {
		var in *inode
		var err error
		if parents {
			in, err = v.mkdirAll(t, p, mode)
		} else {
			var dirIno int64
			var name string
			if dirIno, name, err = v.resolveParent(ctx, t.tx, p); err != nil {
				return err
			}
			var dir *inode
			if dir, err = t.dirInode(dirIno); err != nil {
				return err
			}
			in, err = t.create(dir, name, KindDir, mode, uint32(uidNow()), uint32(gidNow()), "")
		}
		if err != nil {
			return err
		}
		t.audit("mkdir", p, map[string]any{"mode": in.mode, "parents": parents})
		e = entryOf(p, in)
		return nil
	})
	return e, err
}

// mkdirAll makes p and its missing parents, returning p's inode.
func (v *Vault) mkdirAll(t *txn, p string, mode uint32) (*inode, error) {
	cur, err := getInode(t.ctx, t.tx, rootIno)
	if err != nil {
		return nil, err
	}
	for _, name := range splitPath(p) {
		ino, _, ok, err := lookupDentry(t.ctx, t.tx, cur.ino, name)
		if err != nil {
			return nil, err
		}
		if ok {
			child, err := getInode(t.ctx, t.tx, ino)
			if err != nil {
				return nil, err
			}
			if child.kind == KindSymlink {
				cp, err := pathOf(t.ctx, t.tx, cur.ino)
				if err != nil {
					return nil, err
				}
				target, err := v.resolve(t.ctx, t.tx, path.Join(cp, name), true)
				if err != nil {
					return nil, err
				}
				if child, err = getInode(t.ctx, t.tx, target); err != nil {
					return nil, err
				}
			}
			if child.kind != KindDir {
				return nil, wire.Errorf(wire.CodeNotDir, "%s: %q is not a directory", p, name).With("path", p)
			}
			cur = child
			continue
		}
		if cur, err = t.create(cur, name, KindDir, mode, uint32(uidNow()), uint32(gidNow()), ""); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// Symlink makes a symlink at p that points to target.
func (v *Vault) Symlink(ctx context.Context, target, p string) (Entry, error) {
	p, err := CleanPath(p)
	if err != nil {
		return Entry{}, err
	}
	if target == "" {
		return Entry{}, wire.Errorf(wire.CodeInvalidInput, "symlink %s: empty target", p)
	}
	var e Entry
	err = v.update(ctx, "symlink "+p, func(t *txn) error {
		dirIno, name, err := v.resolveParent(ctx, t.tx, p)
		if err != nil {
			return err
		}
		dir, err := t.dirInode(dirIno)
		if err != nil {
			return err
		}
		in, err := t.create(dir, name, KindSymlink, 0o777, uint32(uidNow()), uint32(gidNow()), target)
		if err != nil {
			return err
		}
		t.audit("symlink", p, map[string]any{"target": target})
		e = entryOf(p, in)
		return nil
	})
	return e, err
}

// Chmod sets the permission bits of the entry at p (following symlinks).
func (v *Vault) Chmod(ctx context.Context, p string, mode uint32) (Entry, error) {
	p, err := CleanPath(p)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	err = v.update(ctx, "chmod "+p, func(t *txn) error {
		ino, err := v.resolve(ctx, t.tx, p, true)
		if err != nil {
			return err
		}
		in, err := getInode(ctx, t.tx, ino)
		if err != nil {
			return err
		}
		in.mode, in.ctime = mode&0o7777, t.now
		if err := t.saveInode(in); err != nil {
			return err
		}
		if err := t.recordVersionAt(in, p, "chmod"); err != nil {
			return err
		}
		t.audit("chmod", p, map[string]any{"mode": in.mode})
		e = entryOf(p, in)
		return nil
	})
	return e, err
}

// Remove deletes the entry at p; a non-empty directory needs recursive.
func (v *Vault) Remove(ctx context.Context, p string, recursive bool) (int64, error) {
	p, err := CleanPath(p)
	if err != nil {
		return 0, err
	}
	if p == "/" {
		return 0, wire.Errorf(wire.CodeInvalidPath, "cannot remove the vault root").With("path", p)
	}
	var removed int64
	err = v.update(ctx, "remove "+p, func(t *txn) error {
		dirIno, name, err := v.resolveParent(ctx, t.tx, p)
		if err != nil {
			return err
		}
		dir, err := t.dirInode(dirIno)
		if err != nil {
			return err
		}
		removed, err = t.removeTree(dir, name, recursive)
		if err != nil {
			return err
		}
		t.audit("remove", p, map[string]any{"recursive": recursive, "removed": removed})
		return nil
	})
	return removed, err
}

// removeTree removes dir/name and, when recursive, everything below it.
// It returns how many entries it removed.
func (t *txn) removeTree(dir *inode, name string, recursive bool) (int64, error) {
	ino, _, ok, err := lookupDentry(t.ctx, t.tx, dir.ino, name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, wire.Errorf(wire.CodeNotFound, "%q does not exist", name)
	}
	in, err := getInode(t.ctx, t.tx, ino)
	if err != nil {
		return 0, err
	}
	var n int64
	if in.kind == KindDir && recursive {
		names, err := childNames(t.ctx, t.tx, in.ino)
		if err != nil {
			return 0, err
		}
		for _, c := range names {
			k, err := t.removeTree(in, c, true)
			if err != nil {
				return n, err
			}
			n += k
		}
	}
	if _, err := t.unlinkEntry(dir, name, 0); err != nil {
		return n, err
	}
	return n + 1, nil
}

func childNames(ctx context.Context, q querier, dir int64) ([]string, error) {
	rows, err := q.QueryContext(ctx, "SELECT name FROM dentries WHERE parent = ? AND gen_to = "+liveSQL+" ORDER BY name", dir)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// destination resolves where a copy or move of src lands: inside dst when
// dst is an existing directory, else at dst.
func (v *Vault) destination(t *txn, src, dst string, dirOnly bool) (dir *inode, name, full string, err error) {
	if ino, err := v.resolve(t.ctx, t.tx, dst, true); err == nil {
		if in, err := getInode(t.ctx, t.tx, ino); err == nil && in.kind == KindDir {
			full = path.Join(dst, path.Base(src))
			return in, path.Base(src), full, nil
		}
	}
	if dirOnly {
		// DST/ names a directory, as for mv(1) and cp(1).
		return nil, "", "", wire.Errorf(wire.CodeNotDir, "%s/ is not a directory", dst).With("path", dst)
	}
	dirIno, name, err := v.resolveParent(t.ctx, t.tx, dst)
	if err != nil {
		return nil, "", "", err
	}
	dir, err = t.dirInode(dirIno)
	return dir, name, dst, err
}

// Move renames src to dst (into dst when it is a directory; a dst ending
// in "/" must be one), replacing a file there as rename(2) does.
func (v *Vault) Move(ctx context.Context, src, dst string) (Entry, error) {
	src, err := CleanPath(src)
	if err != nil {
		return Entry{}, err
	}
	dirOnly := strings.HasSuffix(dst, "/")
	if dst, err = CleanPath(dst); err != nil {
		return Entry{}, err
	}
	if src == "/" {
		return Entry{}, wire.Errorf(wire.CodeInvalidPath, "cannot move the vault root")
	}
	var e Entry
	err = v.update(ctx, "move "+src, func(t *txn) error {
		sdirIno, sname, err := v.resolveParent(ctx, t.tx, src)
		if err != nil {
			return err
		}
		if _, _, ok, err := lookupDentry(ctx, t.tx, sdirIno, sname); err != nil {
			return err
		} else if !ok {
			return wire.Errorf(wire.CodeNotFound, "%s: no such file or directory", src).With("path", src)
		}
		ndir, nname, full, err := v.destination(t, src, dst, dirOnly)
		if err != nil {
			return err
		}
		odir := ndir
		if sdirIno != ndir.ino {
			if odir, err = t.dirInode(sdirIno); err != nil {
				return err
			}
		}
		if err := t.rename(odir, sname, ndir, nname, 0); err != nil {
			return err
		}
		ino, err := v.resolve(ctx, t.tx, full, false)
		if err != nil {
			return err
		}
		in, err := getInode(ctx, t.tx, ino)
		if err != nil {
			return err
		}
		t.audit("move", src, map[string]any{"to": full})
		e = entryOf(full, in)
		return nil
	})
	return e, err
}

// Copy copies src to dst (into dst when it is a directory; a dst ending in
// "/" must be one). Content is
// shared by chunk hash, so a copy stores no new data. Directories need recursive.
func (v *Vault) Copy(ctx context.Context, src, dst string, recursive bool) (int64, error) {
	src, err := CleanPath(src)
	if err != nil {
		return 0, err
	}
	dirOnly := strings.HasSuffix(dst, "/")
	if dst, err = CleanPath(dst); err != nil {
		return 0, err
	}
	var copied int64
	err = v.update(ctx, "copy "+src, func(t *txn) error {
		ino, err := v.resolve(ctx, t.tx, src, true)
		if err != nil {
			return err
		}
		in, err := getInode(ctx, t.tx, ino)
		if err != nil {
			return err
		}
		if in.kind == KindDir && !recursive {
			return wire.Errorf(wire.CodeIsDir, "%s is a directory (copy it with -r)", src).With("path", src)
		}
		dir, name, full, err := v.destination(t, src, dst, dirOnly)
		if err != nil {
			return err
		}
		if in.kind == KindDir && (full == src || len(full) > len(src) && full[:len(src)+1] == src+"/") {
			return wire.Errorf(wire.CodeInvalidInput, "cannot copy %s into itself", src)
		}
		copied, err = t.copyTree(ctx, in, dir, name, full)
		if err != nil {
			return err
		}
		t.audit("copy", src, map[string]any{"to": full, "copied": copied})
		return nil
	})
	return copied, err
}

// copyTree copies in (and, for a directory, its entries) to dir/name.
func (t *txn) copyTree(ctx context.Context, in *inode, dir *inode, name, full string) (int64, error) {
	var out *inode
	if ino, _, ok, err := lookupDentry(ctx, t.tx, dir.ino, name); err != nil {
		return 0, err
	} else if ok {
		existing, err := getInode(ctx, t.tx, ino)
		if err != nil {
			return 0, err
		}
		switch {
		case in.kind == KindDir && existing.kind == KindDir:
			out = existing
		case in.kind == KindFile && existing.kind == KindFile:
			existing.chunks, existing.size, existing.mode = in.chunks, in.size, in.mode
			existing.mtime, existing.ctime = t.now, t.now
			if err := t.checkGrowth(existing, existing.size); err != nil {
				return 0, err
			}
			if err := t.saveInode(existing); err != nil {
				return 0, err
			}
			return 1, t.recordVersionAt(existing, full, "copy")
		default:
			return 0, wire.Errorf(wire.CodeAlreadyExists, "%s exists and is a %s", full, existing.kind).With("path", full)
		}
	} else {
		created, err := t.create(dir, name, in.kind, in.mode, uint32(uidNow()), uint32(gidNow()), in.target)
		if err != nil {
			return 0, err
		}
		if in.kind == KindFile {
			if err := t.checkGrowth(created, in.size); err != nil {
				return 0, err
			}
			created.chunks, created.size = in.chunks, in.size
			if err := t.saveInode(created); err != nil {
				return 0, err
			}
			if err := t.recordVersionAt(created, full, "copy"); err != nil {
				return 0, err
			}
		}
		out = created
	}
	n := int64(1)
	if in.kind != KindDir {
		return n, nil
	}
	entries, err := listDir(ctx, t.tx, "", in.ino)
	if err != nil {
		return n, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	for _, c := range entries {
		child, err := getInode(ctx, t.tx, int64(c.Ino))
		if err != nil {
			return n, err
		}
		k, err := t.copyTree(ctx, child, out, c.Name, path.Join(full, c.Name))
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}
