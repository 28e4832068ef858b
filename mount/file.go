package mount

import (
	"context"
	"io"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"avfs/vault"
)

const chunkSize = vault.ChunkSize

// memLimit is how many bytes of unflushed chunks one open file keeps in
// memory before spilling them to a temporary file (see also mountMemLimit).
var memLimit int64 = 32 << 20

// fileState is where an open file is in its life.
type fileState int

// The states of an open file: Open (nothing written), Dirty (unflushed
// writes), Persisting (a flush is committing), Flushed (everything
// written is in the vault). A write while Persisting makes it Dirty again;
// the next flush commits it.
const (
	stateOpen fileState = iota
	stateDirty
	statePersisting
	stateFlushed
)

func (s fileState) String() string {
	return [...]string{"open", "dirty", "persisting", "flushed"}[s]
}

// chunkBuf is the new content of one chunk, in memory, in the spill file,
// or staged in the vault (see stager).
type chunkBuf struct {
	data   []byte // nil when spilled or staged
	slot   int64  // spill file slot when data is nil; -1 when none
	hash   []byte // the staged chunk's hash when staged (data nil, slot -1, length chunkSize)
	length int    // bytes of the chunk that are valid
	seq    uint64 // write sequence of the last change
	hole   bool   // all zeros, no buffer (data is empty and not counted in memBytes)
	queued bool   // data is in a stage job (see unshare)
}

// openFile is the state shared by the open handles of one regular file.
type openFile struct {
	n *node

	flushMu  sync.Mutex // one flush at a time: two would commit each other's chunks
	mu       sync.Mutex
	refs     int
	state    fileState
	size     int64 // with unflushed writes
	baseSize int64 // in the vault
	dirty    map[int64]*chunkBuf
	seq      uint64
	mtime    time.Time
	base     *vault.Content // the vault's content as last read or written; reads of clean chunks go here
	detached bool           // the file lost its last name while open
	unhold   func()         // releases the vault's hold on a detached file's content (see detach)
	attr     vault.Attr     // last attributes seen in the vault, for fstat after unlink
	lastErr  error

	spill     *os.File
	nextSlot  int64 // slots in the spill file, each counted in the mount's buffers
	freeSlots []int64
	memBytes  int64

	// counted is the growth of the vault this file's unflushed writes
	// would commit, as counted in the mount's buffers (see recount);
	// committing is the size a flush under way commits, -1 when none.
	counted    int64
	committing int64

	// Staging (see stager): the file's owner of staged rows (0 until it
	// first stages), its epoch (flush snapshots so far), the highest epoch
	// that may have rows (-1: none), stage jobs queued and completed,
	// signalled on stageCond (on mu), the jobs not sent yet, and the
	// error of a failed stage the next write answers.
	owner               vault.StageOwner
	epoch, rowsEpoch    int64
	enqueued, completed uint64
	stageCond           *sync.Cond
	toSend              []stageJob
	stageErr            error
}

func newOpenFile(n *node, c *vault.Content) *openFile {
	a := c.Attr()
	of := &openFile{n: n, size: a.Size, baseSize: a.Size, attr: a, base: c, dirty: map[int64]*chunkBuf{}, committing: -1, rowsEpoch: -1}
	of.stageCond = sync.NewCond(&of.mu)
	return of
}

// growthAt is by how much committing the file at size would grow the
// vault, beyond what is committed or being committed; of.mu is held. A
// detached file is never committed.
func (of *openFile) growthAt(size int64) int64 {
	if of.detached {
		return 0
	}
	base := of.baseSize
	if of.committing >= 0 {
		base = of.committing
	}
	return max(0, size-base)
}

// recount brings the file's growth in the mount's buffers up to date
// after its size, base or state changed; of.mu is held.
func (of *openFile) recount() {
	if g := of.growthAt(of.size); g != of.counted {
		of.n.fsys.buf.addGrowth(g - of.counted)
		of.counted = g
	}
}

// refresh re-reads the base snapshot when nothing is buffered, so a new
// open sees changes made outside this mount. The snapshot is read under the
// lock: one taken before a flush of this file committed would be older than
// what the flush installed.
func (of *openFile) refresh(ctx context.Context) {
	of.mu.Lock()
	defer of.mu.Unlock()
	if of.detached || len(of.dirty) > 0 || of.size != of.baseSize || of.state == statePersisting {
		return
	}
	c, err := of.n.fsys.store.Content(ctx, of.n.ino)
	if err != nil {
		return
	}
	of.base, of.attr = c, c.Attr()
	of.size, of.baseSize = c.Size(), c.Size()
	of.recount()
}

// lastAttr returns the attributes of a file that has no name left.
func (of *openFile) lastAttr() vault.Attr {
	of.mu.Lock()
	defer of.mu.Unlock()
	a := of.attr
	a.Nlink = 0
	return a
}

// overlay puts the size of unflushed writes into attributes.
func (of *openFile) overlay(out *fuse.Attr) {
	of.mu.Lock()
	defer of.mu.Unlock()
	if of.size != of.baseSize || len(of.dirty) > 0 {
		out.Size = uint64(of.size)
		out.Blocks = (out.Size + 511) / 512
		if !of.mtime.IsZero() {
			out.SetTimes(nil, &of.mtime, &of.mtime)
		}
	}
}

// readBase reads the vault's content (or the detached snapshot) at off into p.
func (of *openFile) readBase(ctx context.Context, p []byte, off int64) error {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	limit := of.baseSize - off
	if limit <= 0 {
		clear(p)
		return nil
	}
	q := p
	if int64(len(q)) > limit {
		q = q[:limit]
	}
	n, err := of.base.ReadAt(ctx, q, off)
	if err != nil && err != io.EOF {
		return err
	}
	clear(p[n:])
	return nil
}

// chunkData returns the current content of dirty chunk cb (a copy when
// spilled or staged; a staged chunk is read back from the vault, verified).
func (of *openFile) chunkData(cb *chunkBuf) ([]byte, error) {
	if cb.data != nil {
		return cb.data, nil
	}
	buf := make([]byte, chunkSize)
	if cb.hash != nil {
		data, err := of.n.fsys.store.ChunkByHash(context.Background(), cb.hash)
		if err != nil {
			return nil, err
		}
		copy(buf, data)
		return buf, nil
	}
	if _, err := of.spill.ReadAt(buf, cb.slot*chunkSize); err != nil && err != io.EOF {
		return nil, err
	}
	return buf, nil
}

// bufLen is the length of a buffer for the first n bytes of a chunk: a
// small file does not cost a whole chunk of memory. Bytes past a chunk's
// valid length are zeros.
func bufLen(n int) int {
	l := 512
	for l < n && l < chunkSize {
		l *= 2
	}
	return l
}

// keep keeps cb's new content, spilling it when memory is over the file's
// or the mount's limit. It fails with ENOSPC when the spill has no room
// (see buffers.takeSpill) or its write fails for lack of space, with EIO
// for other failures of the spill file; cb is then as it was.
func (of *openFile) keep(cb *chunkBuf, data []byte) syscall.Errno {
	if cb.data != nil {
		return 0 // updated in place
	}
	buf := of.n.fsys.buf
	if of.memBytes+chunkSize <= memLimit && buf.takeMem(chunkSize, false) {
		cb.data = data
		of.memBytes += chunkSize
		return 0
	}
	if of.spill == nil {
		f, err := os.CreateTemp(of.n.fsys.spillDir, "avfs-spill-")
		if err != nil {
			return spillErrno(err)
		}
		os.Remove(f.Name())
		of.spill = f
	}
	slot := cb.slot
	if slot < 0 {
		if k := len(of.freeSlots); k > 0 {
			slot, of.freeSlots = of.freeSlots[k-1], of.freeSlots[:k-1]
		} else {
			if en := buf.takeSpill(chunkSize); en != 0 {
				return en
			}
			slot = of.nextSlot
			of.nextSlot++
		}
	}
	if len(data) < chunkSize {
		// A slot is read back whole: its tail must be zeros, not what
		// an earlier chunk left there.
		full := make([]byte, chunkSize)
		copy(full, data)
		data = full
	}
	if _, err := of.spill.WriteAt(data, slot*chunkSize); err != nil {
		if cb.slot < 0 {
			of.freeSlots = append(of.freeSlots, slot)
		}
		return spillErrno(err)
	}
	cb.slot = slot
	return 0
}

func (of *openFile) drop(i int64) {
	cb := of.dirty[i]
	if cb == nil {
		return
	}
	if cb.data != nil {
		if !cb.hole {
			of.memBytes -= chunkSize
			of.n.fsys.buf.takeMem(-chunkSize, true)
		}
	} else if cb.slot >= 0 {
		of.freeSlots = append(of.freeSlots, cb.slot)
	} else if cb.hash != nil {
		of.n.fsys.buf.addStaged(-chunkSize)
	}
	delete(of.dirty, i)
}

func (of *openFile) write(ctx context.Context, p []byte, off int64) (uint32, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	of.mu.Lock()
	n, en := of.writeLocked(ctx, p, off)
	jobs := of.takeJobs()
	of.mu.Unlock()
	of.sendJobs(jobs) // waits while the stager's queue is full: back-pressure
	return n, en
}

// appendAt writes p at the end of the file as this mount knows it (its
// unflushed writes included) and returns where that was. The kernel sends
// an O_APPEND write at its own idea of the file's size, which can lag the
// truth when several processes append at once; POSIX wants the end.
func (of *openFile) appendAt(ctx context.Context, p []byte) (uint32, int64, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	of.mu.Lock()
	off := of.size
	n, en := of.writeLocked(ctx, p, off)
	jobs := of.takeJobs()
	of.mu.Unlock()
	of.sendJobs(jobs)
	return n, off, en
}

// writeLocked writes p at off; of.mu is held. A write that extends the
// file is refused whole with EDQUOT when the vault's size quota has no
// room for it (see fsys.reserveGrowth). A write that fails part way (no
// room to spill) keeps what it wrote, whole chunks of it, and answers a
// short write, so the writer learns how much is kept and gets the error
// from its next write; failing before writing anything, it answers the
// error. A chunk it fills is queued for staging (queueLocked). A stage
// that failed since the last write is answered first (ENOSPC, EIO), once:
// the write is refused whole, and the chunk stays held for the flush.
func (of *openFile) writeLocked(ctx context.Context, p []byte, off int64) (uint32, syscall.Errno) {
	if err := of.stageErr; err != nil {
		of.stageErr = nil
		return 0, errno(err)
	}
	end := off + int64(len(p))
	if d := of.growthAt(max(of.size, end)) - of.counted; d > 0 {
		if en := of.n.fsys.reserveGrowth(ctx, d); en != 0 {
			return 0, en
		}
		of.counted += d
	}
	pos := off
	defer func() {
		if pos > off {
			of.size = max(of.size, pos)
			of.mtime = time.Now()
			of.state = stateDirty
		}
		of.recount() // gives back what was reserved and not written
	}()
	written := func(en syscall.Errno) (uint32, syscall.Errno) {
		if pos > off {
			return uint32(pos - off), 0
		}
		return 0, en
	}
	for pos < end {
		i := pos / chunkSize
		cs := i * chunkSize
		ce := min(cs+chunkSize, end)
		cb := of.dirty[i]
		var data []byte
		need := int(ce - cs)
		if cb == nil {
			cb = &chunkBuf{slot: -1}
			base := int(min(chunkSize, max(0, of.size-cs)))
			data = newChunkBuf(bufLen(max(need, base)))
			if err := of.readBase(ctx, data[:base], cs); err != nil {
				return written(errno(err))
			}
			cb.length = base
		} else {
			of.unshare(cb)
			var err error
			if data, err = of.chunkData(cb); err != nil {
				return written(syscall.EIO)
			}
			if cb.hash != nil {
				// Written again: back to the file's own memory (or spill).
				if en := of.unstage(cb, data); en != 0 {
					return written(en)
				}
			}
			if len(data) < need {
				grown := make([]byte, bufLen(need))
				copy(grown, data)
				data = grown
				if cb.data != nil {
					cb.data = grown
				}
				if cb.hole {
					cb.hole = false
					of.memBytes += chunkSize
					of.n.fsys.buf.takeMem(chunkSize, true)
				}
			}
		}
		copy(data[pos-cs:], p[pos-off:ce-off])
		if en := of.keep(cb, data); en != 0 {
			return written(en)
		}
		cb.length = max(cb.length, int(ce-cs))
		of.seq++
		cb.seq = of.seq
		of.dirty[i] = cb
		of.queueLocked(i, cb)
		pos = ce
	}
	return uint32(len(p)), 0
}

func (of *openFile) read(ctx context.Context, dest []byte, off int64) (int, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	of.mu.Lock()
	defer of.mu.Unlock()
	if off >= of.size {
		return 0, 0
	}
	end := min(off+int64(len(dest)), of.size)
	for pos := off; pos < end; {
		i := pos / chunkSize
		cs := i * chunkSize
		ce := min(cs+chunkSize, end)
		dst := dest[pos-off : ce-off]
		if cb := of.dirty[i]; cb != nil {
			data, err := of.chunkData(cb)
			if err != nil {
				return 0, syscall.EIO
			}
			from := int(pos - cs)
			if from < cb.length {
				k := copy(dst, data[from:cb.length])
				clear(dst[k:])
			} else {
				clear(dst)
			}
		} else {
			// The clean chunks up to the next dirty one are read from the
			// vault together: one query fetches them all.
			for ce < end && of.dirty[ce/chunkSize] == nil {
				ce = min(ce+chunkSize, end)
			}
			if err := of.readBase(ctx, dest[pos-off:ce-off], pos); err != nil {
				return 0, errno(err)
			}
		}
		pos = ce
	}
	return int(end - off), 0
}

// flush commits the unflushed writes in one vault transaction. On failure
// the data stays buffered and the error is returned; the next flush retries.
func (of *openFile) flush(ctx context.Context) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	of.flushMu.Lock()
	defer of.flushMu.Unlock()
	// The chunks queued so far are staged first: the commit then names
	// them by hash.
	of.waitStaged()
	// A file created and not committed yet is committed now, with its
	// content (see pendingCreate); createMu keeps settle out meanwhile.
	n := of.n
	n.createMu.Lock()
	p := n.pend
	if p == nil {
		n.createMu.Unlock()
	} else {
		defer n.createMu.Unlock()
	}
	of.mu.Lock()
	if p == nil && (of.detached || (len(of.dirty) == 0 && of.size == of.baseSize)) {
		if of.state != stateOpen {
			of.state = stateFlushed
		}
		of.mu.Unlock()
		return 0
	}
	size, mtime := of.size, of.mtime
	seqs := make(map[int64]uint64, len(of.dirty))
	idx := make([]int64, 0, len(of.dirty))
	for i, cb := range of.dirty {
		seqs[i] = cb.seq
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	// The commit releases the staged rows of the epochs up to this one;
	// what is staged from now on belongs to the next (see stager).
	owner, epoch := of.owner, of.epoch
	of.epoch++
	of.state = statePersisting
	// The growth being committed leaves the mount's count now and joins
	// the vault's committed bytes once committed (see buffers).
	oldBase, bufEpoch := of.baseSize, n.fsys.buf.committedEpoch()
	of.committing = size
	of.recount()
	of.mu.Unlock()

	get := func(i int64) (vault.Chunk, error) {
		of.mu.Lock()
		defer of.mu.Unlock()
		cb := of.dirty[i]
		if cb == nil {
			// Truncated away meanwhile (setSize): what the vault holds stays.
			buf := make([]byte, chunkSize)
			n := int(min(chunkSize, max(0, of.baseSize-i*chunkSize)))
			if err := of.readBase(ctx, buf[:n], i*chunkSize); err != nil {
				return vault.Chunk{}, err
			}
			return vault.Chunk{Data: buf[:n]}, nil
		}
		if cb.hash != nil && cb.seq == seqs[i] {
			// Staged whole, unchanged since the snapshot: within size.
			return vault.Chunk{Hash: cb.hash}, nil
		}
		data, err := of.chunkData(cb)
		if err != nil {
			return vault.Chunk{}, err
		}
		return vault.Chunk{Data: append([]byte(nil), data[:cb.length]...)}, nil
	}
	commit := vault.FileCommit{Size: size, Indexes: idx, Chunk: get, Mtime: mtime, Owner: owner, Epoch: epoch}
	var c *vault.Content
	var err error
	if p != nil {
		if mtime.IsZero() {
			commit.Mtime = p.spec.Time // nothing written: the file is as created
		}
		c, err = n.fsys.store.CreateFileStaged(ctx, p.parent, p.name, p.spec, commit)
		if err != nil {
			// As if the create had been committed when it was answered:
			// the file exists, empty, and its content is kept for a retry.
			if _, merr := n.fsys.store.Mknod(ctx, p.parent, p.name, p.spec); merr == nil {
				n.pend = nil
				n.fsys.donePending(n)
			}
		} else {
			n.pend = nil
			n.fsys.donePending(n)
		}
	} else {
		c, err = n.fsys.store.PersistStaged(ctx, n.ino, commit)
	}

	of.mu.Lock()
	of.committing = -1
	if err != nil {
		of.state = stateDirty
		of.lastErr = err
		of.recount()
		of.mu.Unlock()
		return errno(err)
	}
	n.fsys.buf.flushed(size-oldBase, bufEpoch)
	if of.rowsEpoch <= epoch {
		of.rowsEpoch = -1 // the commit released them all
	}
	a := c.Attr()
	of.base = c
	for _, i := range idx {
		if cb := of.dirty[i]; cb != nil && cb.seq == seqs[i] {
			of.drop(i)
		}
	}
	of.baseSize = size
	of.attr = a
	of.lastErr = nil
	of.recount()
	if len(of.dirty) == 0 {
		of.truncateSpill()
	}
	if len(of.dirty) == 0 && of.size == of.baseSize {
		of.state = stateFlushed
		of.mtime = time.Time{}
	} else {
		of.state = stateDirty
	}
	of.mu.Unlock()
	of.n.remember(a) // node lock after the file lock is released: open takes them the other way round
	return 0
}

// setSize follows a truncate that went to the vault directly.
func (of *openFile) setSize(ctx context.Context, size int64) {
	c, err := of.n.fsys.store.Content(ctx, of.n.ino)
	of.mu.Lock()
	defer of.mu.Unlock()
	if err == nil {
		of.base, of.attr = c, c.Attr()
	}
	last := (size + chunkSize - 1) / chunkSize
	for i, cb := range of.dirty {
		switch {
		case i >= last:
			of.drop(i)
		case i == last-1 && cb.length > int(size-i*chunkSize):
			of.unshare(cb)
			if data, err := of.chunkData(cb); err == nil {
				if of.unstage(cb, data) != 0 {
					// No room to hold it: the truncate in the vault stands,
					// this chunk's unflushed content is lost with it.
					of.drop(i)
					continue
				}
				cb.length = int(size - i*chunkSize)
				clear(data[cb.length:])
				_ = of.keep(cb, data)
			}
		}
	}
	of.size, of.baseSize = size, size
	of.recount()
}

// detach keeps the file's content readable after its last name is removed.
// The base snapshot outlives the inode, so reads go on from it.
// Only history refers to that content now: the vault holds it from
// retention until the file is closed.
func (of *openFile) detach(a vault.Attr) {
	of.mu.Lock()
	defer of.mu.Unlock()
	of.detached = true
	of.attr = a
	if of.unhold == nil {
		of.unhold = of.n.fsys.store.Hold(of.n.ino)
	}
	of.recount()
}

// truncateSpill empties the spill file once no chunk is in it, giving its
// space back; of.mu is held.
func (of *openFile) truncateSpill() {
	if of.spill == nil || of.nextSlot == 0 {
		return
	}
	if err := of.spill.Truncate(0); err != nil {
		return
	}
	of.n.fsys.buf.dropSpill(of.nextSlot * chunkSize)
	of.nextSlot, of.freeSlots = 0, nil
}

// close releases the spill file, whatever the file still counts in the
// mount's buffers (the unflushed writes of a detached file, dropped) and
// the hold on a detached file's content.
func (of *openFile) close() {
	of.mu.Lock()
	defer of.mu.Unlock()
	buf := of.n.fsys.buf
	if of.spill != nil {
		of.spill.Close()
		of.spill = nil
		buf.dropSpill(of.nextSlot * chunkSize)
		of.nextSlot, of.freeSlots = 0, nil
	}
	buf.takeMem(-of.memBytes, true)
	of.memBytes = 0
	for _, cb := range of.dirty {
		if cb.hash != nil {
			buf.addStaged(-chunkSize)
		}
	}
	if of.rowsEpoch >= 0 {
		// What the file staged and did not commit (a detached file, a
		// failed flush) is no longer anyone's; should this fail, the
		// mount's end releases it.
		_ = of.n.fsys.store.ReleaseStaged(context.Background(), of.owner)
		of.rowsEpoch = -1
	}
	buf.addGrowth(-of.counted)
	of.counted = 0
	if of.unhold != nil {
		of.unhold()
		of.unhold = nil
	}
}

// handle is one open file description of a regular file.
type handle struct {
	of       *openFile
	writable bool
	append   bool // opened with O_APPEND: every write goes to the end
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if en := n.fsys.settle(ctx); en != 0 {
		return nil, 0, en
	}
	h, en := n.openHandle(ctx, flags, nil)
	if en != 0 {
		return nil, 0, en
	}
	h.of.mu.Lock()
	a := h.of.attr
	h.of.mu.Unlock()
	var fuseFlags uint32
	n.mu.Lock()
	tok := cacheToken{size: a.Size, mtime: a.Mtime.UnixNano()}
	if n.token == tok {
		fuseFlags |= fuse.FOPEN_KEEP_CACHE // unchanged since the kernel cached it
	}
	n.token = tok
	n.mu.Unlock()
	return h, fuseFlags, 0
}

// openHandle opens a handle on the shared open-file state.
// c is the content of a file just created; nil reads it from the vault.
func (n *node) openHandle(ctx context.Context, flags uint32, c *vault.Content) (*handle, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	acc := flags & syscall.O_ACCMODE
	writable := acc == syscall.O_WRONLY || acc == syscall.O_RDWR
	if writable && n.fsys.readonly {
		return nil, syscall.EROFS
	}
	// The content is read under the node's lock: a snapshot read before
	// another handle's last flush and release would be older than the file.
	n.mu.Lock()
	if n.open == nil {
		if c == nil {
			var err error
			if c, err = n.fsys.store.Content(ctx, n.ino); err != nil {
				n.mu.Unlock()
				return nil, errno(err)
			}
		}
		if c.Attr().Kind != vault.KindFile {
			n.mu.Unlock()
			return nil, syscall.EISDIR
		}
		n.open = newOpenFile(n, c)
	} else {
		n.open.refresh(ctx)
	}
	of := n.open
	of.mu.Lock()
	of.refs++
	size := of.size
	of.mu.Unlock()
	n.mu.Unlock()
	h := &handle{of: of, writable: writable, append: writable && flags&syscall.O_APPEND != 0}
	if writable && flags&syscall.O_TRUNC != 0 && size != 0 {
		if en := of.flush(ctx); en != 0 {
			h.Release(ctx)
			return nil, en
		}
		zero := int64(0)
		got, err := n.fsys.store.SetAttr(ctx, n.ino, vault.SetAttr{Size: &zero})
		if err != nil {
			h.Release(ctx)
			return nil, errno(err)
		}
		of.setSize(ctx, 0)
		n.remember(got)
	}
	return h, 0
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	n, en := h.of.read(ctx, dest, off)
	if en != 0 {
		return nil, en
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	if !h.writable {
		return 0, syscall.EBADF
	}
	// Refuse early what can never fit, so that the writer sees EDQUOT at write().
	// The cached quota only ever lets a write through early; a refusal is re-checked.
	end := off + int64(len(data))
	if limit := h.of.n.fsys.maxFileBytes(ctx, false); limit > 0 && end > limit {
		if limit = h.of.n.fsys.maxFileBytes(ctx, true); limit > 0 && end > limit {
			h.of.n.fsys.buf.refusedQuota()
			return 0, syscall.EDQUOT
		}
	}
	// Only a write(2) goes to the end: the kernel also writes mmap'ed
	// pages back through any writable handle, an O_APPEND one included,
	// and those (sent without a caller, pid 0) belong where they are.
	if caller, ok := fuse.FromContext(ctx); h.append && ok && caller.Pid != 0 {
		n, at, en := h.of.appendAt(ctx, data)
		if at != off && en == 0 {
			// The kernel placed the data at off in its page cache and
			// believes the file ends at off+n: drop both (not from this
			// handler, which the kernel waits for with the pages locked).
			go h.of.n.NotifyContent(0, 0)
		}
		return n, en
	}
	return h.of.write(ctx, data, off)
}

func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.of.flush(ctx) }

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno { return h.of.flush(ctx) }

// The fallocate(2) modes (linux/falloc.h).
const (
	fallocKeepSize      = 0x01
	fallocPunchHole     = 0x02
	fallocCollapseRange = 0x08
	fallocZeroRange     = 0x10
	fallocInsertRange   = 0x20
)

// Allocate honours fallocate(2): plain allocation grows the file (a vault
// reserves no space, so KEEP_SIZE alone does nothing); PUNCH_HOLE (with
// KEEP_SIZE, as Linux requires) and ZERO_RANGE make the range read as
// zeros, ZERO_RANGE growing the file unless KEEP_SIZE. Chunks the range
// covers whole become holes, which the vault does not store. Collapse,
// insert and any other mode fail with EOPNOTSUPP.
func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	of := h.of
	end := int64(off + size)
	if end < int64(off) {
		return syscall.EFBIG
	}
	switch mode {
	case 0, fallocKeepSize:
		if mode == fallocKeepSize {
			return 0
		}
		of.mu.Lock()
		grow := end > of.size
		if grow {
			of.size = end
			of.state = stateDirty
			of.recount()
		}
		of.mu.Unlock()
		if grow {
			return of.flush(ctx)
		}
		return 0
	case fallocPunchHole | fallocKeepSize, fallocZeroRange, fallocZeroRange | fallocKeepSize:
		of.mu.Lock()
		en := of.zeroLocked(ctx, int64(off), end)
		if en == 0 && mode == fallocZeroRange && end > of.size {
			of.size = end
			of.state = stateDirty
			of.recount()
		}
		of.mu.Unlock()
		if en != 0 {
			return en
		}
		return of.flush(ctx)
	}
	return syscall.EOPNOTSUPP
}

// zeroLocked makes [off, end) of the file as it is now read as zeros,
// without changing its size: chunks the range covers whole become empty
// dirty chunks (holes once flushed), the partial ones get zeros written.
// of.mu is held.
func (of *openFile) zeroLocked(ctx context.Context, off, end int64) syscall.Errno {
	end = min(end, of.size)
	for pos := off; pos < end; {
		i := pos / chunkSize
		cs := i * chunkSize
		ce := min(cs+chunkSize, end)
		if pos == cs && (ce == cs+chunkSize || ce == of.size) {
			of.drop(i)
			of.seq++
			of.dirty[i] = &chunkBuf{data: []byte{}, slot: -1, hole: true, seq: of.seq}
			of.mtime = time.Now()
			of.state = stateDirty
		} else if _, en := of.writeLocked(ctx, make([]byte, ce-pos), pos); en != 0 {
			return en
		}
		pos = ce
	}
	return 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	ctx = context.WithoutCancel(ctx) // never answer EINTR: an interrupted caller would see it
	of := h.of
	n := of.n
	// Writes that arrive after the last flush (mmap writeback) are committed here.
	en := of.flush(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	of.mu.Lock()
	of.refs--
	// A detached file's unflushed writes can never be committed nor read
	// once its last handle goes: dropped.
	idle := of.refs == 0 && (of.detached || len(of.dirty) == 0 && of.size == of.baseSize)
	of.mu.Unlock()
	if idle && n.open == of {
		of.close()
		n.open = nil
	}
	return en
}
