package mount

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"avfs/vault"
)

// dirHandle lists a directory from a snapshot taken at opendir (and at
// rewind), so offsets stay stable while entries are added or removed.
type dirHandle struct {
	n       *node
	entries []vault.DirEntry
	pos     int
	loaded  bool
}

var (
	_ fs.FileLookuper     = (*dirHandle)(nil)
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	d := &dirHandle{n: n}
	if en := d.load(ctx); en != 0 {
		return nil, 0, en
	}
	return d, 0, 0
}

func (d *dirHandle) load(ctx context.Context) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := d.n.fsys.settle(ctx); en != 0 {
		return en
	}
	ents, err := d.n.fsys.store.ReadDir(ctx, d.n.ino)
	if err != nil {
		return errno(err)
	}
	d.entries, d.pos, d.loaded = ents, 0, true
	return 0
}

// Offsets: 1 is after ".", 2 after "..", 2+k after entry k.
func (d *dirHandle) Readdirent(context.Context) (*fuse.DirEntry, syscall.Errno) {
	switch {
	case d.pos == 0:
		d.pos = 1
		return &fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: d.n.ino, Off: 1}, 0
	case d.pos == 1:
		d.pos = 2
		ino := d.n.ino
		if p := d.n.Inode.EmbeddedInode(); p != nil {
			if _, parent := p.Parent(); parent != nil {
				ino = parent.StableAttr().Ino
			}
		}
		return &fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: ino, Off: 2}, 0
	}
	k := d.pos - 2
	if k >= len(d.entries) {
		return nil, 0
	}
	e := d.entries[k]
	d.pos++
	return &fuse.DirEntry{Name: e.Name, Mode: kindMode(e.Kind), Ino: e.Ino, Off: uint64(d.pos)}, 0
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if off == 0 {
		return d.load(ctx)
	}
	d.pos = int(off)
	return 0
}

// Fsyncdir commits the files created in the mount and not flushed yet:
// after fsync of a directory, its entries are in the vault.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.n.fsys.settle(context.WithoutCancel(ctx))
}

// Lookup answers READDIRPLUS from the listing's snapshot, so listing a
// directory costs one query rather than one per entry. The name is the
// last one Readdirent produced.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if k := d.pos - 3; k >= 0 && k < len(d.entries) && d.entries[k].Name == name {
		return d.n.child(ctx, d.entries[k].Attr, out), 0
	}
	return d.n.Lookup(ctx, name, out)
}
