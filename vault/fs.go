package vault

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"sort"
	"time"

	"avfs/wire"
)

// This file is the inode-level API a file system layer (the FUSE mount)
// serves from: every call is one transaction, named by inode numbers.

// RootIno is the inode number of the vault's root directory.
const RootIno uint64 = rootIno

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string `json:"name"`
	Ino  uint64 `json:"ino"`
	Kind Kind   `json:"kind"`
	Attr Attr   `json:"attr"` // the entry's attributes when listed
}

// GetAttr returns the attributes of inode ino.
func (v *Vault) GetAttr(ctx context.Context, ino uint64) (Attr, error) {
	in, err := v.readInode(ctx, int64(ino))
	if err != nil {
		return Attr{}, wrapOp("getattr", err)
	}
	return in.attr(), nil
}

// Lookup returns the attributes of the entry name in directory parent.
func (v *Vault) Lookup(ctx context.Context, parent uint64, name string) (Attr, error) {
	// Two point queries: a join of dentries and inodes measured slower.
	// Should the entry go between them, the name no longer exists.
	var ino int64
	err := v.ws.readRow(ctx, v.r, func(r *sql.Row) error { return r.Scan(&ino) },
		"SELECT ino FROM dentries WHERE parent = ? AND name = ? AND gen_to = "+liveSQL, parent, name)
	if errors.Is(err, sql.ErrNoRows) {
		return Attr{}, wire.Errorf(wire.CodeNotFound, "%q does not exist", name)
	}
	if err != nil {
		return Attr{}, storageErr("lookup", err)
	}
	in, err := v.readInode(ctx, ino)
	if wire.HasCode(err, wire.CodeNotFound) {
		return Attr{}, wire.Errorf(wire.CodeNotFound, "%q does not exist", name)
	}
	if err != nil {
		return Attr{}, storageErr("lookup", err)
	}
	return in.attr(), nil
}

// ReadDir lists directory ino sorted by name (without "." and "..").
func (v *Vault) ReadDir(ctx context.Context, ino uint64) ([]DirEntry, error) {
	in, err := v.readInode(ctx, int64(ino))
	if err != nil {
		return nil, wrapOp("readdir", err)
	}
	if in.kind != KindDir {
		return nil, wire.Errorf(wire.CodeNotDir, "readdir: not a directory")
	}
	rows, err := v.r.QueryContext(ctx, `SELECT d.name, `+prefixed("i.", inodeCols)+` FROM dentries d JOIN inodes i ON i.ino = d.ino AND i.gen_to = `+liveSQL+`
		WHERE d.parent = ? AND d.gen_to = `+liveSQL+` ORDER BY d.name`, ino)
	if err != nil {
		return nil, storageErr("readdir", err)
	}
	defer rows.Close()
	out := []DirEntry{}
	for rows.Next() {
		var name string
		in := &inode{}
		if err := rows.Scan(&name, &in.ino, &in.genFrom, &in.kind, &in.mode, &in.uid, &in.gid, &in.size, &in.nlink,
			&in.mtime, &in.ctime, &in.atime, &in.target, &in.chunks, &in.xattrs); err != nil {
			return nil, storageErr("readdir", err)
		}
		out = append(out, DirEntry{Name: name, Ino: uint64(in.ino), Kind: in.kind, Attr: in.attr()})
	}
	if err := rows.Err(); err != nil {
		return nil, storageErr("readdir", err)
	}
	return out, nil
}

// NodeSpec describes a new inode for Mknod.
type NodeSpec struct {
	Kind   Kind
	Mode   uint32 // permission bits
	UID    uint32
	GID    uint32
	Target string // symlink target
	Rdev   uint64 // device number of a chardev or blockdev node
	// Ino, when not 0, is the node's number, from ReserveIno.
	Ino uint64
	// Time, when not zero, is the node's creation time (its mtime, ctime
	// and atime) instead of the commit's.
	Time time.Time
}

// Mknod creates a file, directory, symlink, named pipe or socket node
// named name in parent.
func (v *Vault) Mknod(ctx context.Context, parent uint64, name string, spec NodeSpec) (Attr, error) {
	var a Attr
	op := map[Kind]string{KindFile: "create", KindDir: "mkdir", KindSymlink: "symlink", KindFifo: "mkfifo", KindSocket: "mksock", KindCharDev: "mknod", KindBlockDev: "mknod"}[spec.Kind]
	if op == "" {
		return a, wire.Errorf(wire.CodeInvalidInput, "mknod: unsupported kind %d", spec.Kind)
	}
	if spec.Kind.Device() {
		spec.Target = rdevTarget(spec.Rdev)
	}
	err := v.update(ctx, op, func(t *txn) error {
		dir, err := t.dirInode(int64(parent))
		if err != nil {
			return err
		}
		in, err := t.createSpec(dir, name, spec, false)
		if err != nil {
			return err
		}
		p, _ := t.childPath(dir.ino, name)
		details := map[string]any{"mode": in.mode}
		if spec.Kind == KindSymlink {
			details["target"] = spec.Target
		}
		if spec.Kind.Device() {
			details["kind"], details["rdev"] = spec.Kind.String(), spec.Rdev
		}
		t.audit(op, p, details)
		a = in.attr()
		return nil
	})
	return a, err
}

// Link makes name in parent another name of inode ino.
func (v *Vault) Link(ctx context.Context, ino, parent uint64, name string) (Attr, error) {
	var a Attr
	err := v.update(ctx, "link", func(t *txn) error {
		in, err := getInode(ctx, t.tx, int64(ino))
		if err != nil {
			return err
		}
		dir, err := t.dirInode(int64(parent))
		if err != nil {
			return err
		}
		if err := t.link(in, dir, name); err != nil {
			return err
		}
		p, _ := t.childPath(dir.ino, name)
		t.audit("link", p, map[string]any{"ino": ino})
		a = in.attr()
		return nil
	})
	return a, err
}

// Unlink removes the non-directory entry name from parent.
func (v *Vault) Unlink(ctx context.Context, parent uint64, name string) error {
	return v.update(ctx, "unlink", func(t *txn) error {
		dir, err := t.dirInode(int64(parent))
		if err != nil {
			return err
		}
		p, _ := t.childPath(dir.ino, name)
		if _, err := t.unlinkEntry(dir, name, KindFile); err != nil {
			return err
		}
		t.audit("remove", p, nil)
		return nil
	})
}

// Rmdir removes the empty directory name from parent.
func (v *Vault) Rmdir(ctx context.Context, parent uint64, name string) error {
	return v.update(ctx, "rmdir", func(t *txn) error {
		dir, err := t.dirInode(int64(parent))
		if err != nil {
			return err
		}
		p, _ := t.childPath(dir.ino, name)
		if _, err := t.unlinkEntry(dir, name, KindDir); err != nil {
			return err
		}
		t.audit("rmdir", p, nil)
		return nil
	})
}

// Rename moves oldParent/oldName to newParent/newName with rename(2) semantics.
func (v *Vault) Rename(ctx context.Context, oldParent uint64, oldName string, newParent uint64, newName string, flags RenameFlags) error {
	return v.update(ctx, "rename", func(t *txn) error {
		odir, err := t.dirInode(int64(oldParent))
		if err != nil {
			return err
		}
		ndir := odir
		if newParent != oldParent {
			if ndir, err = t.dirInode(int64(newParent)); err != nil {
				return err
			}
		}
		from, _ := t.childPath(odir.ino, oldName)
		to, _ := t.childPath(ndir.ino, newName)
		if err := t.rename(odir, oldName, ndir, newName, flags); err != nil {
			return err
		}
		t.audit("move", from, map[string]any{"to": to})
		return nil
	})
}

// SetAttr changes what is non-nil: mode, owner, size (truncate or extend), times.
type SetAttr struct {
	Mode  *uint32
	UID   *uint32
	GID   *uint32
	Size  *int64
	Atime *time.Time
	Mtime *time.Time
}

// SetAttr applies s to inode ino.
func (v *Vault) SetAttr(ctx context.Context, ino uint64, s SetAttr) (Attr, error) {
	var a Attr
	err := v.update(ctx, "setattr", func(t *txn) error {
		in, err := getInode(ctx, t.tx, int64(ino))
		if err != nil {
			return err
		}
		details := map[string]any{}
		op := "setattr"
		if s.Size != nil {
			if err := t.truncate(in, *s.Size); err != nil {
				return err
			}
			details["size"], op = *s.Size, "truncate"
		}
		if s.Mode != nil {
			in.mode = *s.Mode & 0o7777
			details["mode"] = in.mode
			if op == "setattr" {
				op = "chmod"
			}
		}
		if s.UID != nil {
			in.uid = *s.UID
			details["uid"] = in.uid
		}
		if s.GID != nil {
			in.gid = *s.GID
			details["gid"] = in.gid
		}
		if s.Atime != nil {
			in.atime = s.Atime.UnixNano()
		}
		if s.Mtime != nil {
			in.mtime = s.Mtime.UnixNano()
			details["mtime_ns"] = in.mtime
		}
		in.ctime = t.now
		if err := t.saveInode(in); err != nil {
			return err
		}
		if s.Size != nil || s.Mode != nil {
			if err := t.recordVersionAt(in, "", op); err != nil && !wire.HasCode(err, wire.CodeNotFound) {
				return err
			}
		}
		p, _ := t.inoPath(in.ino)
		t.audit(op, p, details)
		a = in.attr()
		return nil
	})
	return a, err
}

// ReadAt reads file ino's content at off; io.EOF at or past the end. A
// damaged chunk fails it with integrity_failed (see Content.ReadAt).
func (v *Vault) ReadAt(ctx context.Context, ino uint64, p []byte, off int64) (int, error) {
	var n int
	var rerr error
	err := v.view(ctx, "read", func(q querier, _ state) error {
		in, err := getInode(ctx, q, int64(ino))
		if err != nil {
			return err
		}
		if in.kind != KindFile {
			return wire.Errorf(wire.CodeIsDir, "not a regular file")
		}
		n, rerr = v.readAt(ctx, q, in, p, off)
		if rerr == io.EOF {
			return nil
		}
		return withFile(rerr, "", "ino", ino)
	})
	if err != nil {
		return n, err
	}
	return n, rerr
}

// WriteAt writes p at off in file ino, in one transaction.
func (v *Vault) WriteAt(ctx context.Context, ino uint64, p []byte, off int64) (Attr, error) {
	var a Attr
	err := v.update(ctx, "write", func(t *txn) error {
		in, err := getInode(ctx, t.tx, int64(ino))
		if err != nil {
			return err
		}
		if err := t.writeAt(in, p, off); err != nil {
			return err
		}
		if err := t.saveInode(in); err != nil {
			return err
		}
		if err := t.recordVersionAt(in, "", "write"); err != nil && !wire.HasCode(err, wire.CodeNotFound) {
			return err
		}
		path, _ := t.inoPath(in.ino)
		t.audit("write", path, map[string]any{"offset": off, "length": len(p), "size": in.size})
		a = in.attr()
		return nil
	})
	return a, err
}

// Persist commits a file's changed chunks in one transaction and returns
// the file's new content. indexes names
// the chunks that changed and chunk(i) returns chunk i's whole new content
// (at most ChunkSize bytes; bytes past size are ignored); it is called once
// per index inside the transaction, so the caller need not hold every chunk
// in memory. Chunks not named keep their content; chunks past size are
// dropped. size is the file's new size; mtime, when non-zero, its new
// modification time.
func (v *Vault) Persist(ctx context.Context, ino uint64, size int64, indexes []int64, chunk func(i int64) ([]byte, error), mtime time.Time) (*Content, error) {
	return v.PersistStaged(ctx, ino, dataCommit(size, indexes, chunk, mtime))
}

// PersistStaged is Persist with chunks given as data or as the hashes of
// chunks staged before (StageChunks), releasing the owner's staged rows
// (see FileCommit) in the same transaction. A staged hash must name a
// chunk no longer than its span in the file at c.Size.
func (v *Vault) PersistStaged(ctx context.Context, ino uint64, c FileCommit) (*Content, error) {
	var out *Content
	err := v.update(ctx, "write", func(t *txn) error {
		in, err := getInode(ctx, t.tx, int64(ino))
		if err != nil {
			return err
		}
		if in.kind != KindFile {
			return wire.Errorf(wire.CodeIsDir, "not a regular file")
		}
		if err := t.persist(in, c); err != nil {
			return err
		}
		if err := t.recordVersionAt(in, "", "write"); err != nil && !wire.HasCode(err, wire.CodeNotFound) {
			return err
		}
		path, _ := t.inoPath(in.ino)
		t.audit("write", path, map[string]any{"size": c.Size, "chunks_written": len(c.Indexes)})
		out = &Content{v: v, attr: in.attr(), size: in.size, chunks: in.chunks}
		return nil
	})
	return out, err
}

// CreateFile creates the regular file name in parent with the content
// Persist would write, in one transaction: what a writer mount commits
// when a file it created is first flushed. Its history starts with one
// version, the created file with that content.
func (v *Vault) CreateFile(ctx context.Context, parent uint64, name string, spec NodeSpec, size int64, indexes []int64, chunk func(i int64) ([]byte, error), mtime time.Time) (*Content, error) {
	return v.CreateFileStaged(ctx, parent, name, spec, dataCommit(size, indexes, chunk, mtime))
}

// CreateFileStaged is CreateFile with the content of a FileCommit (see
// PersistStaged).
func (v *Vault) CreateFileStaged(ctx context.Context, parent uint64, name string, spec NodeSpec, c FileCommit) (*Content, error) {
	if spec.Kind != KindFile {
		return nil, wire.Errorf(wire.CodeInvalidInput, "create file: not a regular file (kind %d)", spec.Kind)
	}
	var out *Content
	err := v.update(ctx, "create", func(t *txn) error {
		dir, err := t.dirInode(int64(parent))
		if err != nil {
			return err
		}
		in, err := t.createSpec(dir, name, spec, true)
		if err != nil {
			return err
		}
		p, _ := t.childPath(dir.ino, name)
		t.audit("create", p, map[string]any{"mode": in.mode})
		if err := t.persist(in, c); err != nil {
			return err
		}
		if err := t.recordVersionAt(in, p, "create"); err != nil {
			return err
		}
		t.audit("write", p, map[string]any{"size": c.Size, "chunks_written": len(c.Indexes)})
		out = &Content{v: v, attr: in.attr(), size: in.size, chunks: in.chunks}
		return nil
	})
	return out, err
}

// persist writes the chunks c names into in, sized c.Size, saves it and
// releases c's staged rows; recording the version is the caller's.
func (t *txn) persist(in *inode, c FileCommit) error {
	size := c.Size
	if err := t.checkGrowth(in, size); err != nil {
		return err
	}
	if size < in.size {
		if err := t.truncate(in, size); err != nil {
			return err
		}
	}
	n := (size + ChunkSize - 1) / ChunkSize
	m := in.chunks
	if need := int(n * hashLen); len(m) < need {
		grown := make([]byte, need)
		copy(grown, m)
		m = grown
	} else {
		m = append([]byte(nil), m...)
	}
	for _, i := range c.Indexes {
		if i < 0 || i >= n {
			continue
		}
		ch, err := c.Chunk(i)
		if err != nil {
			return err
		}
		h := ch.Hash
		if h == nil {
			data := ch.Data
			if span := size - i*ChunkSize; int64(len(data)) > span {
				data = data[:span]
			}
			if len(data) > ChunkSize {
				return wire.Errorf(wire.CodeInvalidInput, "chunk %d is larger than %d bytes", i, ChunkSize)
			}
			if h, err = t.putChunk(data); err != nil {
				return err
			}
		} else if len(h) != hashLen {
			return wire.Errorf(wire.CodeInvalidInput, "chunk %d: a hash of %d bytes", i, len(h))
		}
		copy(m[i*hashLen:], h)
	}
	in.chunks, in.size = m, size
	in.mtime, in.ctime = t.now, t.now
	if !c.Mtime.IsZero() {
		in.mtime = c.Mtime.UnixNano()
	}
	if c.Owner != 0 {
		if err := t.releaseStaged(c.Owner, c.Epoch); err != nil {
			return err
		}
		t.stagedIn = true
	}
	return t.saveInode(in)
}

// Content is a file's content as of one moment: it stays readable after
// the file is changed or deleted (until gc frees its chunks).
type Content struct {
	v      *Vault
	attr   Attr
	size   int64
	chunks []byte
}

// Content returns the current content of file ino.
func (v *Vault) Content(ctx context.Context, ino uint64) (*Content, error) {
	in, err := v.readInode(ctx, int64(ino))
	if err != nil {
		return nil, wrapOp("read", err)
	}
	return &Content{v: v, attr: in.attr(), size: in.size, chunks: in.chunks}, nil
}

// EmptyContent is the content of a file just created empty (by Mknod),
// without asking the vault again.
func (v *Vault) EmptyContent(a Attr) *Content {
	return &Content{v: v, attr: a, chunks: []byte{}}
}

// Attr are the file's attributes at that moment.
func (c *Content) Attr() Attr { return c.attr }

// Size is the content's length.
func (c *Content) Size() int64 { return c.size }

// ReadAt reads the content at off; io.EOF at or past the end. Every chunk
// is verified against its hash first: a damaged one fails the read with
// integrity_failed (details: chunk, ino, offset) and none of its bytes is
// copied into p.
func (c *Content) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	in := &inode{kind: KindFile, size: c.size, chunks: c.chunks}
	n, err := c.v.readAt(ctx, c.v.r, in, p, off)
	if err != nil && err != io.EOF {
		err = withFile(err, "", "ino", c.attr.Ino)
	}
	return n, err
}

// GetXattr returns the value of extended attribute name of inode ino.
func (v *Vault) GetXattr(ctx context.Context, ino uint64, name string) ([]byte, error) {
	in, err := v.readInode(ctx, int64(ino))
	if err != nil {
		return nil, wrapOp("getxattr", err)
	}
	m, err := decodeXattrs(in.xattrs)
	if err != nil {
		return nil, err
	}
	val, ok := m[name]
	if !ok {
		return nil, wire.Errorf(wire.CodeNotFound, "no extended attribute %q", name)
	}
	return val, nil
}

// ListXattr returns the names of inode ino's extended attributes, sorted.
func (v *Vault) ListXattr(ctx context.Context, ino uint64) ([]string, error) {
	in, err := v.readInode(ctx, int64(ino))
	if err != nil {
		return nil, wrapOp("listxattr", err)
	}
	m, err := decodeXattrs(in.xattrs)
	if err != nil {
		return nil, err
	}
	names := []string{}
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// SetXattr sets (or, with value nil and remove, removes) extended attribute
// name. flags: XattrCreate fails when it exists, XattrReplace when it does not.
func (v *Vault) SetXattr(ctx context.Context, ino uint64, name string, value []byte, flags int) error {
	return v.changeXattr(ctx, ino, name, value, flags, false)
}

// RemoveXattr removes extended attribute name (not_found when absent).
func (v *Vault) RemoveXattr(ctx context.Context, ino uint64, name string) error {
	return v.changeXattr(ctx, ino, name, nil, 0, true)
}

func (v *Vault) changeXattr(ctx context.Context, ino uint64, name string, value []byte, flags int, remove bool) error {
	if name == "" || len(name) > maxXattrName {
		return wire.Errorf(wire.CodeInvalidInput, "invalid extended attribute name")
	}
	if len(value) > maxXattrValue {
		return wire.Errorf(wire.CodeQuotaExceeded, "extended attribute value too large (%d bytes)", len(value))
	}
	op := "setxattr"
	if remove {
		op = "removexattr"
	}
	return v.editXattrs(ctx, ino, op, map[string]any{"name": name}, func(m map[string][]byte) error {
		_, exists := m[name]
		switch {
		case remove && !exists:
			return wire.Errorf(wire.CodeNotFound, "no extended attribute %q", name)
		case !remove && flags&XattrCreate != 0 && exists:
			return wire.Errorf(wire.CodeAlreadyExists, "extended attribute %q exists", name)
		case !remove && flags&XattrReplace != 0 && !exists:
			return wire.Errorf(wire.CodeNotFound, "no extended attribute %q", name)
		}
		if remove {
			delete(m, name)
		} else {
			m[name] = append([]byte{}, value...)
		}
		return nil
	})
}

// editXattrs changes the extended attributes of ino with edit, in one
// transaction audited as op with details: nothing changes when edit
// fails, and the whole set must fit in maxXattrTotal.
func (v *Vault) editXattrs(ctx context.Context, ino uint64, op string, details map[string]any, edit func(m map[string][]byte) error) error {
	return v.update(ctx, op, func(t *txn) error {
		in, err := getInode(ctx, t.tx, int64(ino))
		if err != nil {
			return err
		}
		m, err := decodeXattrs(in.xattrs)
		if err != nil {
			return err
		}
		if err := edit(m); err != nil {
			return err
		}
		enc := encodeXattrs(m)
		if len(enc) > maxXattrTotal {
			return wire.Errorf(wire.CodeQuotaExceeded, "extended attributes of this file exceed %d bytes", maxXattrTotal)
		}
		in.xattrs, in.ctime = enc, t.now
		if err := t.saveInode(in); err != nil {
			return err
		}
		p, _ := t.inoPath(in.ino)
		t.audit(op, p, details)
		return nil
	})
}
