package vault

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"avfs/wire"
)

// ctxT shortens signatures of internal helpers.
type ctxT = context.Context

// Kind is the type of an inode.
type Kind int

// Inode kinds.
const (
	KindFile    Kind = 1
	KindDir     Kind = 2
	KindSymlink Kind = 3
	// A named pipe and a Unix socket node have no content: the kernel
	// carries their data. A socket node outlives its socket as on disk.
	KindFifo   Kind = 4
	KindSocket Kind = 5
	// A character or block device node is only its number (Attr.Rdev,
	// kept in the inode's target column as a decimal string): a mount is
	// nodev, so it opens nothing, and it has no content.
	KindCharDev  Kind = 6
	KindBlockDev Kind = 7
)

// String returns "file", "dir", "symlink", "fifo", "socket", "chardev" or "blockdev".
func (k Kind) String() string {
	switch k {
	case KindFile:
		return "file"
	case KindDir:
		return "dir"
	case KindSymlink:
		return "symlink"
	case KindFifo:
		return "fifo"
	case KindSocket:
		return "socket"
	case KindCharDev:
		return "chardev"
	case KindBlockDev:
		return "blockdev"
	}
	return "unknown"
}

// special is true for the kinds that have neither content nor entries.
func (k Kind) special() bool { return k == KindFifo || k == KindSocket || k.Device() }

// Device is true for character and block device nodes.
func (k Kind) Device() bool { return k == KindCharDev || k == KindBlockDev }

// rdevTarget is how a device number is kept in the target column.
func rdevTarget(rdev uint64) string { return strconv.FormatUint(rdev, 10) }

// MarshalText makes kinds strings on the wire.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind MarshalText wrote (a client of avfs serve
// reads the documents the daemon answers); an unknown name is an error.
func (k *Kind) UnmarshalText(b []byte) error {
	for _, c := range []Kind{KindFile, KindDir, KindSymlink, KindFifo, KindSocket, KindCharDev, KindBlockDev} {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unknown kind %q", b)
}

// Attr are an inode's attributes.
type Attr struct {
	Ino    uint64        `json:"ino"`
	Kind   Kind          `json:"kind"`
	Mode   wire.FileMode `json:"mode"` // permission bits (07777), "0644" in JSON
	UID    uint32        `json:"uid"`
	GID    uint32        `json:"gid"`
	Size   int64         `json:"size"`
	Nlink  uint32        `json:"nlink"`
	Mtime  time.Time     `json:"mtime"`
	Ctime  time.Time     `json:"ctime"`
	Atime  time.Time     `json:"atime"`
	Target string        `json:"target,omitempty"` // symlink target
	Rdev   uint64        `json:"rdev,omitempty"`   // device number of a chardev or blockdev node
}

// FileMode returns the attributes as an os.FileMode.
func (a Attr) FileMode() os.FileMode {
	m := os.FileMode(a.Mode & 0o777)
	if a.Mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if a.Mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if a.Mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	switch a.Kind {
	case KindDir:
		m |= os.ModeDir
	case KindSymlink:
		m |= os.ModeSymlink
	case KindFifo:
		m |= os.ModeNamedPipe
	case KindSocket:
		m |= os.ModeSocket
	case KindCharDev:
		m |= os.ModeDevice | os.ModeCharDevice
	case KindBlockDev:
		m |= os.ModeDevice
	}
	return m
}

// inode is a live inode row as loaded in a transaction.
type inode struct {
	ino      int64
	genFrom  int64 // 0 for an inode not yet stored
	kind     Kind
	mode     uint32
	uid, gid uint32
	size     int64
	nlink    int64
	mtime    int64
	ctime    int64
	atime    int64
	target   string
	chunks   []byte // concatenated chunk hashes
	xattrs   []byte // encoded extended attributes (see xattr.go)

	oldSize int64 // size when loaded, for the byte counter
	fresh   bool  // created in this transaction: no history yet
	// lastVersion is the history version this transaction last recorded
	// for a fresh inode (0: none yet).
	lastVersion int64
}

func (in *inode) attr() Attr {
	a := Attr{Ino: uint64(in.ino), Kind: in.kind, Mode: wire.FileMode(in.mode), UID: in.uid, GID: in.gid, Size: in.size,
		Nlink: uint32(in.nlink), Mtime: time.Unix(0, in.mtime), Ctime: time.Unix(0, in.ctime), Atime: time.Unix(0, in.atime), Target: in.target}
	if in.kind.Device() {
		a.Rdev, _ = strconv.ParseUint(in.target, 10, 64)
		a.Target = ""
	}
	return a
}

const inodeCols = "ino, gen_from, kind, mode, uid, gid, size, nlink, mtime_ns, ctime_ns, atime_ns, target, chunks, xattrs"

func scanInode(sc interface{ Scan(...any) error }) (*inode, error) {
	in := &inode{}
	if err := sc.Scan(&in.ino, &in.genFrom, &in.kind, &in.mode, &in.uid, &in.gid, &in.size, &in.nlink,
		&in.mtime, &in.ctime, &in.atime, &in.target, &in.chunks, &in.xattrs); err != nil {
		return nil, err
	}
	in.oldSize = in.size
	return in, nil
}

// getInode loads the live row of ino.
func getInode(ctx ctxT, q querier, ino int64) (*inode, error) {
	in, err := scanInode(q.QueryRowContext(ctx, "SELECT "+inodeCols+" FROM inodes WHERE ino = ? AND gen_to = "+liveSQL, ino))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, wire.Errorf(wire.CodeNotFound, "no inode %d", ino)
	}
	return in, err
}

// readInode loads the live row of ino outside a transaction (see stmtCache.readRow).
func (v *Vault) readInode(ctx ctxT, ino int64) (*inode, error) {
	var in *inode
	err := v.ws.readRow(ctx, v.r, func(r *sql.Row) (err error) {
		in, err = scanInode(r)
		return err
	}, "SELECT "+inodeCols+" FROM inodes WHERE ino = ? AND gen_to = "+liveSQL, ino)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, wire.Errorf(wire.CodeNotFound, "no inode %d", ino)
	}
	return in, err
}

// saveInode writes in as the live row of the current generation: updated in
// place when the row already belongs to this generation, else the old row is
// closed and a new one inserted, so checkpoints keep seeing the old one.
// It keeps the file and byte counters and the per-file size quota.
func (t *txn) saveInode(in *inode) error {
	t.tree = true
	if in.chunks == nil {
		in.chunks = []byte{}
	}
	if in.xattrs == nil {
		in.xattrs = []byte{}
	}
	if in.kind == KindFile {
		if t.st.maxFileBytes > 0 && in.size > t.st.maxFileBytes && in.size > in.oldSize {
			return wire.Errorf(wire.CodeQuotaExceeded, "file size quota exceeded: %d bytes would exceed max_file_size_mb=%d", in.size, t.st.maxFileBytes>>20).
				With("quota", "max_file_size_mb").With("limit", t.st.maxFileBytes>>20).With("size", in.size)
		}
		t.st.bytes += in.size - in.oldSize
	}
	in.oldSize = in.size
	gen := t.st.gen
	switch {
	case in.genFrom == gen:
		_, err := t.tx.ExecContext(t.ctx, `UPDATE inodes SET kind=?, mode=?, uid=?, gid=?, size=?, nlink=?, mtime_ns=?, ctime_ns=?, atime_ns=?, target=?, chunks=?, xattrs=?
			WHERE ino = ? AND gen_from = ?`, in.kind, in.mode, in.uid, in.gid, in.size, in.nlink, in.mtime, in.ctime, in.atime, in.target, in.chunks, in.xattrs, in.ino, gen)
		return err
	case in.genFrom != 0:
		if _, err := t.tx.ExecContext(t.ctx, "UPDATE inodes SET gen_to = ? WHERE ino = ? AND gen_to = "+liveSQL, gen, in.ino); err != nil {
			return err
		}
	default:
		t.st.files++
	}
	in.genFrom = gen
	_, err := t.tx.ExecContext(t.ctx, "INSERT INTO inodes ("+inodeCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		in.ino, gen, in.kind, in.mode, in.uid, in.gid, in.size, in.nlink, in.mtime, in.ctime, in.atime, in.target, in.chunks, in.xattrs)
	return err
}

// dropInode removes in from the live state.
func (t *txn) dropInode(in *inode) error {
	t.tree = true
	var err error
	if in.genFrom == t.st.gen {
		_, err = t.tx.ExecContext(t.ctx, "DELETE FROM inodes WHERE ino = ? AND gen_from = ?", in.ino, in.genFrom)
	} else {
		_, err = t.tx.ExecContext(t.ctx, "UPDATE inodes SET gen_to = ? WHERE ino = ? AND gen_to = "+liveSQL, t.st.gen, in.ino)
	}
	if err != nil {
		return err
	}
	t.st.files--
	if in.kind == KindFile {
		t.st.bytes -= in.oldSize
	}
	return nil
}

// newInode allocates an inode number and fills in a new inode.
func (t *txn) newInode(kind Kind, mode, uid, gid uint32, target string) *inode {
	return t.newInodeAt(t.v.allocIno(t.st.nextIno), kind, mode, uid, gid, target)
}

// newInodeAt is newInode with the inode number ino (allocated or reserved).
func (t *txn) newInodeAt(ino int64, kind Kind, mode, uid, gid uint32, target string) *inode {
	t.st.nextIno = max(t.st.nextIno, ino+1)
	in := &inode{ino: ino, kind: kind, mode: mode & 0o7777, uid: uid, gid: gid, nlink: 1,
		mtime: t.now, ctime: t.now, atime: t.now, target: target, chunks: []byte{}, xattrs: []byte{}, fresh: true}
	if kind == KindDir {
		in.nlink = 2
	}
	if kind == KindSymlink {
		in.size = int64(len(target))
	}
	return in
}

// lookupDentry returns the inode a live entry names, and the entry's generation.
func lookupDentry(ctx ctxT, q querier, parent int64, name string) (ino, genFrom int64, ok bool, err error) {
	err = q.QueryRowContext(ctx, "SELECT ino, gen_from FROM dentries WHERE parent = ? AND name = ? AND gen_to = "+liveSQL, parent, name).Scan(&ino, &genFrom)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	return ino, genFrom, err == nil, err
}

// setDentry makes parent/name name ino, replacing any live entry.
func (t *txn) setDentry(parent int64, name string, ino int64) error {
	if err := t.dropDentry(parent, name); err != nil {
		return err
	}
	return t.insertDentry(parent, name, ino)
}

// insertDentry adds parent/name -> ino where no live entry exists.
func (t *txn) insertDentry(parent int64, name string, ino int64) error {
	t.tree = true
	_, err := t.tx.ExecContext(t.ctx, "INSERT INTO dentries (parent, name, gen_from, ino) VALUES (?, ?, ?, ?)", parent, name, t.st.gen, ino)
	return err
}

// dropDentry removes the live entry parent/name, if any.
func (t *txn) dropDentry(parent int64, name string) error {
	_, genFrom, ok, err := lookupDentry(t.ctx, t.tx, parent, name)
	if err != nil || !ok {
		return err
	}
	return t.dropDentryAt(parent, name, genFrom)
}

// dropDentryAt removes the live entry parent/name whose row starts at genFrom.
func (t *txn) dropDentryAt(parent int64, name string, genFrom int64) error {
	t.tree = true
	var err error
	if genFrom == t.st.gen {
		_, err = t.tx.ExecContext(t.ctx, "DELETE FROM dentries WHERE parent = ? AND name = ? AND gen_from = ?", parent, name, genFrom)
	} else {
		_, err = t.tx.ExecContext(t.ctx, "UPDATE dentries SET gen_to = ? WHERE parent = ? AND name = ? AND gen_to = "+liveSQL, t.st.gen, parent, name)
	}
	return err
}

// validName checks one path component.
// ValidEntryName checks a directory entry name as every operation that
// makes one does (invalid_path when it is empty, ".", "..", holds "/" or
// NUL, or is longer than 255 bytes).
func ValidEntryName(name string) error { return validName(name) }

func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return wire.Errorf(wire.CodeInvalidPath, "invalid file name %q", name)
	}
	if len(name) > 255 {
		return wire.Errorf(wire.CodeInvalidPath, "file name too long (%d bytes, at most 255)", len(name))
	}
	return nil
}

// pathOf returns a live path of ino ("/" for the root), following the first
// entry that names it.
func pathOf(ctx ctxT, q querier, ino int64) (string, error) {
	var parts []string
	for ino != rootIno {
		var parent int64
		var name string
		err := q.QueryRowContext(ctx, "SELECT parent, name FROM dentries WHERE ino = ? AND gen_to = "+liveSQL+" ORDER BY parent, name LIMIT 1", ino).Scan(&parent, &name)
		if errors.Is(err, sql.ErrNoRows) {
			return "", wire.Errorf(wire.CodeNotFound, "inode %d has no path", ino)
		}
		if err != nil {
			return "", err
		}
		parts = append(parts, name)
		ino = parent
		if len(parts) > 4096 {
			return "", wire.Errorf(wire.CodeInternal, "directory loop at inode %d", ino)
		}
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(parts[i])
	}
	if b.Len() == 0 {
		return "/", nil
	}
	return b.String(), nil
}
