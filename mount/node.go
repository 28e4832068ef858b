package mount

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"avfs/vault"
	"avfs/wire"
)

// fsys is what every node of one mount shares.
type fsys struct {
	store    Store
	readonly bool
	spillDir string
	uid, gid uint32 // owner of files created by a process whose ids are unknown
	buf      *buffers
	stager   *stager // nil on a read-only mount

	quotaMu sync.Mutex
	quota   vault.Quota
	quotaAt time.Time

	// Files created but not committed yet (see node.pend).
	pendMu  sync.Mutex
	pending map[*node]struct{}
	npend   atomic.Int32
}

// quotas returns the vault's quotas, re-read at most once a second unless
// fresh is set; the vault's bytes read with them go to the mount's buffers.
func (f *fsys) quotas(ctx context.Context, fresh bool) vault.Quota {
	f.quotaMu.Lock()
	defer f.quotaMu.Unlock()
	if fresh || time.Since(f.quotaAt) > time.Second {
		if u, err := f.store.Usage(ctx); err == nil {
			f.quota, f.quotaAt = u.Quota, time.Now()
			f.buf.setCommitted(u.Bytes)
		}
	}
	return f.quota
}

// owner returns the owner of a node the request creates: its caller.
func (f *fsys) owner(ctx context.Context) (uid, gid uint32) {
	if caller, ok := fuse.FromContext(ctx); ok {
		return caller.Uid, caller.Gid
	}
	return f.uid, f.gid
}

// maxFileBytes returns the file size quota (0: none), re-read at most once
// a second unless fresh is set.
func (f *fsys) maxFileBytes(ctx context.Context, fresh bool) int64 {
	return f.quotas(ctx, fresh).MaxFileSizeMB << 20
}

// pendingCreate is a regular file the kernel was told exists but the vault
// does not hold yet: a writer mount answers a create at once and commits
// the file with its first content when the file is first flushed (close,
// fsync), in one transaction instead of two. Any other request that could
// see the file, or its directory, commits every pending create first
// (fsys.settle), so only the creating handle's writes and reads, and the
// node's own attributes, are ever answered for a file not in the vault.
type pendingCreate struct {
	parent uint64
	name   string
	spec   vault.NodeSpec // with the reserved inode number and the creation time
}

// attr is what the vault will hold for the new file.
func (p *pendingCreate) attr() vault.Attr {
	t := p.spec.Time
	return vault.Attr{Ino: p.spec.Ino, Kind: vault.KindFile, Mode: wire.FileMode(p.spec.Mode & 0o7777), UID: p.spec.UID, GID: p.spec.GID,
		Nlink: 1, Mtime: t, Ctime: t, Atime: t}
}

func (f *fsys) addPending(n *node) {
	f.pendMu.Lock()
	if f.pending == nil {
		f.pending = map[*node]struct{}{}
	}
	f.pending[n] = struct{}{}
	f.npend.Store(int32(len(f.pending)))
	f.pendMu.Unlock()
}

func (f *fsys) donePending(n *node) {
	f.pendMu.Lock()
	delete(f.pending, n)
	f.npend.Store(int32(len(f.pending)))
	f.pendMu.Unlock()
}

// settle commits every pending create, as an empty file when it has not
// been flushed yet (its content follows with its flush, as for any file).
func (f *fsys) settle(ctx context.Context) syscall.Errno {
	if f.npend.Load() == 0 {
		return 0
	}
	f.pendMu.Lock()
	nodes := make([]*node, 0, len(f.pending))
	for n := range f.pending {
		nodes = append(nodes, n)
	}
	f.pendMu.Unlock()
	for _, n := range nodes {
		if en := n.commitCreate(ctx); en != 0 {
			return en
		}
	}
	return 0
}

// commitCreate commits n's pending create, if any, as an empty file.
func (n *node) commitCreate(ctx context.Context) syscall.Errno {
	n.createMu.Lock()
	defer n.createMu.Unlock()
	p := n.pend
	if p == nil {
		return 0
	}
	if _, err := n.fsys.store.Mknod(ctx, p.parent, p.name, p.spec); err != nil {
		return errno(err)
	}
	n.pend = nil
	n.fsys.donePending(n)
	return 0
}

// pendingAttr returns the attributes of n while its create is pending.
func (n *node) pendingAttr() (vault.Attr, bool) {
	n.createMu.Lock()
	defer n.createMu.Unlock()
	if n.pend == nil {
		return vault.Attr{}, false
	}
	return n.pend.attr(), true
}

// node is one inode of the mount.
type node struct {
	fs.Inode
	fsys *fsys
	ino  uint64

	mu    sync.Mutex
	open  *openFile // shared by the open handles of a regular file
	token cacheToken
	xa    xattrState

	createMu sync.Mutex     // held while a pending create commits
	pend     *pendingCreate // the file is not in the vault yet (guarded by createMu)
}

// xattrState remembers that an inode has no extended attributes, so that
// the kernel's security.capability query before a file's first write need
// not reach the vault. Only a writer mount keeps it: extended attributes
// change only through the mount that holds the vault's writer lock.
type xattrState struct {
	none  bool   // known to have none
	epoch uint64 // bumped when a change starts
	busy  int    // changes in progress
}

// noXattrs reports whether n is known to have no extended attributes.
func (n *node) noXattrs() bool {
	if n.fsys.readonly {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.xa.none
}

// xattrChange marks the start of a change of n's extended attributes; the
// returned function marks its end.
func (n *node) xattrChange() func() {
	n.mu.Lock()
	n.xa.none = false
	n.xa.epoch++
	n.xa.busy++
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		n.xa.busy--
		n.mu.Unlock()
	}
}

// xattrEpoch returns the change epoch, for learnedNoXattrs.
func (n *node) xattrEpoch() (uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.xa.epoch, n.xa.busy == 0
}

// learnedNoXattrs records that a listing found no extended attributes,
// unless a change started since epoch (or was under way).
func (n *node) learnedNoXattrs(epoch uint64, idle bool) {
	if n.fsys.readonly || !idle {
		return
	}
	n.mu.Lock()
	if n.xa.epoch == epoch && n.xa.busy == 0 {
		n.xa.none = true
	}
	n.mu.Unlock()
}

// cacheToken identifies content the kernel may still have cached.
type cacheToken struct {
	size  int64
	mtime int64
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeGetxattrer     = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
	_ fs.NodeListxattrer    = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeAccesser       = (*node)(nil)
)

func kindMode(k vault.Kind) uint32 {
	switch k {
	case vault.KindDir:
		return syscall.S_IFDIR
	case vault.KindSymlink:
		return syscall.S_IFLNK
	case vault.KindFifo:
		return syscall.S_IFIFO
	case vault.KindSocket:
		return syscall.S_IFSOCK
	case vault.KindCharDev:
		return syscall.S_IFCHR
	case vault.KindBlockDev:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}

// fillAttr converts vault attributes to FUSE attributes.
func fillAttr(a vault.Attr, out *fuse.Attr) {
	out.Ino = a.Ino
	out.Size = uint64(a.Size)
	out.Blocks = (uint64(a.Size) + 511) / 512
	out.Blksize = 4096
	out.Mode = kindMode(a.Kind) | uint32(a.Mode)
	out.Nlink = a.Nlink
	out.Rdev = uint32(a.Rdev)
	out.Owner = fuse.Owner{Uid: a.UID, Gid: a.GID}
	out.SetTimes(&a.Atime, &a.Mtime, &a.Ctime)
}

// child returns the go-fuse inode for a, creating the node when new.
func (n *node) child(ctx context.Context, a vault.Attr, out *fuse.EntryOut) *fs.Inode {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	fillAttr(a, &out.Attr)
	ch := n.NewInode(ctx, &node{fsys: n.fsys, ino: a.Ino}, fs.StableAttr{Mode: kindMode(a.Kind), Ino: a.Ino})
	if cn, ok := ch.Operations().(*node); ok {
		cn.overlayOpen(&out.Attr)
	}
	return ch
}

// overlayOpen puts the size of unflushed writes into attributes.
func (n *node) overlayOpen(out *fuse.Attr) {
	n.mu.Lock()
	of := n.open
	n.mu.Unlock()
	if of != nil {
		of.overlay(out)
	}
}

// nameMax is the longest name the mount accepts, in bytes (NAME_MAX).
const nameMax = 255

// checkName answers ENAMETOOLONG for a name longer than nameMax, whether
// or not it exists: the kernel looks a name up before chmod, unlink,
// rename, link or a create, so Lookup answering so covers them all.
func checkName(name string) syscall.Errno {
	if len(name) > nameMax {
		return syscall.ENAMETOOLONG
	}
	return 0
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := checkName(name); en != 0 {
		return nil, en
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return nil, en
	}
	a, err := n.fsys.store.Lookup(ctx, n.ino, name)
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, a, out), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if a, ok := n.pendingAttr(); ok {
		fillAttr(a, &out.Attr)
		n.overlayOpen(&out.Attr)
		return 0
	}
	if en := n.fsys.settle(ctx); en != 0 { // a directory's attributes count its pending files
		return en
	}
	a, err := n.fsys.store.GetAttr(ctx, n.ino)
	if err != nil {
		n.mu.Lock()
		of := n.open
		n.mu.Unlock()
		if of == nil || errno(err) != syscall.ENOENT {
			return errno(err)
		}
		a = of.lastAttr() // open, but its last name is gone
	}
	fillAttr(a, &out.Attr)
	n.overlayOpen(&out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if n.fsys.readonly {
		return syscall.EROFS
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return en
	}
	var s vault.SetAttr
	if m, ok := in.GetMode(); ok {
		m &= 0o7777
		s.Mode = &m
	}
	if uid, ok := in.GetUID(); ok {
		s.UID = &uid
	}
	if gid, ok := in.GetGID(); ok {
		s.GID = &gid
	}
	if sz, ok := in.GetSize(); ok {
		size := int64(sz)
		s.Size = &size
	}
	now := time.Now()
	if at, ok := in.GetATime(); ok {
		s.Atime = &at
	} else if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
		s.Atime = &now
	}
	if mt, ok := in.GetMTime(); ok {
		s.Mtime = &mt
	} else if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
		s.Mtime = &now
	}
	// Unflushed writes go first, so that a truncate or a time applies after them.
	n.mu.Lock()
	of := n.open
	n.mu.Unlock()
	if of != nil {
		if err := of.flush(ctx); err != 0 {
			return err
		}
	}
	a, err := n.fsys.store.SetAttr(ctx, n.ino, s)
	if err != nil {
		return errno(err)
	}
	if of != nil && s.Size != nil {
		of.setSize(ctx, a.Size)
	}
	n.remember(a)
	fillAttr(a, &out.Attr)
	return 0
}

// remember records the attributes of content the kernel now caches.
func (n *node) remember(a vault.Attr) {
	n.mu.Lock()
	n.token = cacheToken{size: a.Size, mtime: a.Mtime.UnixNano()}
	n.mu.Unlock()
}

func (n *node) Access(context.Context, uint32) syscall.Errno {
	// Permissions are checked by the kernel (default_permissions).
	return 0
}

func (n *node) create(ctx context.Context, name string, spec vault.NodeSpec, out *fuse.EntryOut) (*fs.Inode, vault.Attr, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := checkName(name); en != 0 {
		return nil, vault.Attr{}, en
	}
	if n.fsys.readonly {
		return nil, vault.Attr{}, syscall.EROFS
	}
	spec.UID, spec.GID = n.fsys.owner(ctx)
	if en := n.fsys.settle(ctx); en != 0 {
		return nil, vault.Attr{}, en
	}
	a, err := n.fsys.store.Mknod(ctx, n.ino, name, spec)
	if err != nil {
		return nil, vault.Attr{}, errno(err)
	}
	ch := n.child(ctx, a, out)
	if cn, ok := ch.Operations().(*node); ok {
		cn.mu.Lock()
		if cn.xa.busy == 0 {
			cn.xa.none = true // a new inode has no extended attributes
		}
		cn.mu.Unlock()
	}
	return ch, a, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	ch, _, en := n.create(ctx, name, vault.NodeSpec{Kind: vault.KindDir, Mode: mode & 0o7777}, out)
	return ch, en
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	var kind vault.Kind
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG, 0:
		kind = vault.KindFile
	case syscall.S_IFIFO:
		kind = vault.KindFifo // the kernel carries the data: opens never reach us
	case syscall.S_IFSOCK:
		kind = vault.KindSocket // bind(2) of a Unix socket makes one
	case syscall.S_IFCHR:
		kind = vault.KindCharDev // kept as its number: the mount is nodev, so it opens nothing
	case syscall.S_IFBLK:
		kind = vault.KindBlockDev
	default:
		return nil, syscall.EINVAL
	}
	ch, _, en := n.create(ctx, name, vault.NodeSpec{Kind: kind, Mode: mode & 0o7777, Rdev: uint64(dev)}, out)
	return ch, en
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := checkName(name); en != 0 {
		return nil, nil, 0, en
	}
	spec := vault.NodeSpec{Kind: vault.KindFile, Mode: mode & 0o7777}
	if n.lazyCreate(ctx, name) {
		return n.createPending(ctx, name, flags, spec, out)
	}
	ch, a, en := n.create(ctx, name, spec, out)
	if en != 0 {
		return nil, nil, 0, en
	}
	cn := ch.Operations().(*node)
	h, en := cn.openHandle(ctx, flags, n.fsys.store.EmptyContent(a))
	if en != 0 {
		return nil, nil, 0, en
	}
	return ch, h, 0, 0
}

// lazyCreate reports whether a new file named name may be answered before
// it is committed (see pendingCreate): on a writer mount of a vault with
// no quota on the number of files (which a create must check at once),
// for a name the vault accepts.
func (n *node) lazyCreate(ctx context.Context, name string) bool {
	return !n.fsys.readonly && vault.ValidEntryName(name) == nil && n.fsys.quotas(ctx, false).MaxFiles == 0
}

// createPending answers a create with a reserved inode number and leaves
// the file to be committed by its first flush.
func (n *node) createPending(ctx context.Context, name string, flags uint32, spec vault.NodeSpec, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	spec.UID, spec.GID = n.fsys.owner(ctx)
	ino, err := n.fsys.store.ReserveIno(ctx)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	spec.Ino, spec.Time = ino, time.Now()
	p := &pendingCreate{parent: n.ino, name: name, spec: spec}
	a := p.attr()
	ch := n.child(ctx, a, out)
	cn := ch.Operations().(*node)
	cn.createMu.Lock()
	cn.pend = p
	cn.createMu.Unlock()
	cn.mu.Lock()
	if cn.xa.busy == 0 {
		cn.xa.none = true // a new inode has no extended attributes
	}
	cn.mu.Unlock()
	n.fsys.addPending(cn)
	h, en := cn.openHandle(ctx, flags, n.fsys.store.EmptyContent(a))
	if en != 0 {
		_ = cn.commitCreate(ctx)
		return nil, nil, 0, en
	}
	return ch, h, 0, 0
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	ch, _, en := n.create(ctx, name, vault.NodeSpec{Kind: vault.KindSymlink, Mode: 0o777, Target: target}, out)
	return ch, en
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	a, err := n.fsys.store.GetAttr(ctx, n.ino)
	if err != nil {
		return nil, errno(err)
	}
	if a.Kind != vault.KindSymlink {
		return nil, syscall.EINVAL
	}
	return []byte(a.Target), 0
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := checkName(name); en != 0 {
		return nil, en
	}
	if n.fsys.readonly {
		return nil, syscall.EROFS
	}
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return nil, en
	}
	a, err := n.fsys.store.Link(ctx, t.ino, n.ino, name)
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, a, out), 0
}

// detachChild keeps an open file readable after its last name goes away.
func (n *node) detachChild(ctx context.Context, name string) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	ch := n.GetChild(name)
	if ch == nil {
		return
	}
	cn, ok := ch.Operations().(*node)
	if !ok {
		return
	}
	cn.mu.Lock()
	of := cn.open
	cn.mu.Unlock()
	if of == nil {
		return
	}
	a, err := n.fsys.store.GetAttr(ctx, cn.ino)
	if err != nil || a.Nlink > 1 {
		return
	}
	of.detach(a)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := checkName(name); en != 0 {
		return en
	}
	if n.fsys.readonly {
		return syscall.EROFS
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return en
	}
	n.detachChild(ctx, name)
	return errno(n.fsys.store.Unlink(ctx, n.ino, name))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := checkName(name); en != 0 {
		return en
	}
	if n.fsys.readonly {
		return syscall.EROFS
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return en
	}
	return errno(n.fsys.store.Rmdir(ctx, n.ino, name))
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := max(checkName(name), checkName(newName)); en != 0 {
		return en
	}
	if n.fsys.readonly {
		return syscall.EROFS
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return en
	}
	var rf vault.RenameFlags
	if flags&renameNoReplace != 0 {
		rf |= vault.RenameNoReplace
	}
	if flags&fs.RENAME_EXCHANGE != 0 {
		rf |= vault.RenameExchange
	}
	if flags&^(renameNoReplace|fs.RENAME_EXCHANGE) != 0 {
		return syscall.EINVAL
	}
	if rf&vault.RenameExchange == 0 {
		np.detachChild(ctx, newName)
	}
	return errno(n.fsys.store.Rename(ctx, n.ino, name, np.ino, newName, rf))
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := n.fsys.settle(ctx); en != 0 {
		return en
	}
	u, err := n.fsys.store.Usage(ctx)
	if err != nil {
		return errno(err)
	}
	const bsize = 4096
	out.Bsize, out.Frsize, out.NameLen = bsize, bsize, 255
	total := uint64(1 << 50) // unlimited: a petabyte
	if u.Quota.MaxSizeMB > 0 {
		total = uint64(u.Quota.MaxSizeMB) << 20
	}
	used := uint64(u.Bytes)
	free := uint64(0)
	if total > used {
		free = total - used
	}
	out.Blocks, out.Bfree, out.Bavail = total/bsize, free/bsize, free/bsize
	files := uint64(1 << 32)
	if u.Quota.MaxFiles > 0 {
		files = uint64(u.Quota.MaxFiles)
	}
	out.Files = files
	if files > uint64(u.Files) {
		out.Ffree = files - uint64(u.Files)
	}
	return 0
}

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if n.noXattrs() {
		return 0, syscall.ENODATA
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return 0, en
	}
	val, err := n.fsys.store.GetXattr(ctx, n.ino, attr)
	if err != nil {
		if en := errno(err); en == syscall.ENOENT {
			return 0, syscall.ENODATA
		} else {
			return 0, en
		}
	}
	if len(dest) < len(val) {
		return uint32(len(val)), syscall.ERANGE
	}
	return uint32(copy(dest, val)), 0
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if n.fsys.readonly {
		return syscall.EROFS
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return en
	}
	defer n.xattrChange()()
	if attr == aclAccess {
		perm, minimal, ok := aclMode(data)
		if !ok {
			return syscall.EINVAL
		}
		a, err := n.fsys.store.GetAttr(ctx, n.ino)
		if err != nil {
			return errno(err)
		}
		mode := uint32(a.Mode)&^0o777 | perm
		if _, err := n.fsys.store.SetAttr(ctx, n.ino, vault.SetAttr{Mode: &mode}); err != nil {
			return errno(err)
		}
		if minimal {
			// The mode says it all; drop an older extended ACL.
			if err := n.fsys.store.RemoveXattr(ctx, n.ino, attr); err != nil && errno(err) != syscall.ENOENT {
				return errno(err)
			}
			return 0
		}
	}
	err := n.fsys.store.SetXattr(ctx, n.ino, attr, data, int(flags))
	if en := errno(err); en == syscall.ENOENT {
		return syscall.ENODATA
	} else if en == syscall.EDQUOT {
		return syscall.E2BIG
	} else {
		return en
	}
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if n.fsys.readonly {
		return syscall.EROFS
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return en
	}
	defer n.xattrChange()()
	if en := errno(n.fsys.store.RemoveXattr(ctx, n.ino, attr)); en == syscall.ENOENT {
		return syscall.ENODATA
	} else {
		return en
	}
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if n.noXattrs() {
		return 0, 0
	}
	if en := n.fsys.settle(ctx); en != 0 {
		return 0, en
	}
	epoch, idle := n.xattrEpoch()
	names, err := n.fsys.store.ListXattr(ctx, n.ino)
	if err != nil {
		return 0, errno(err)
	}
	if len(names) == 0 {
		n.learnedNoXattrs(epoch, idle)
	}
	var b []byte
	for _, name := range names {
		b = append(b, name...)
		b = append(b, 0)
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	n.mu.Lock()
	of := n.open
	n.mu.Unlock()
	if of != nil {
		return of.flush(ctx)
	}
	return 0
}

// renameNoReplace is renameat2's RENAME_NOREPLACE.
const renameNoReplace = 0x1
