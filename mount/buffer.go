package mount

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountMemLimit is how many bytes of unflushed chunks all the open files
// of one mount keep in memory together; past it (or past one file's
// memLimit) chunks spill to the file's temporary file.
var mountMemLimit int64 = 128 << 20

// Spill margins: spilling stops with ENOSPC while the spill directory's
// file system would keep less than spillMarginPart of its size free, or
// less than spillMarginMax: what other writers there (the command's own
// temporary files, a build) are left.
var (
	spillMarginPart int64 = 20 // a twentieth: 5%
	spillMarginMax  int64 = 256 << 20
)

// spillGrantMax bounds the spill bytes one statfs of the spill directory
// allows: the free space is asked again at least that often.
const spillGrantMax = 64 << 20

// BufferStats is what a mount holds of writes not committed to the vault
// yet: every open file's unflushed chunks, in memory or spilled to
// temporary files (Options.SpillDir). Bytes are whole 64 KiB chunks.
type BufferStats struct {
	MemoryBytes int64 `json:"memory_bytes"` // unflushed chunks held in memory
	SpillBytes  int64 `json:"spill_bytes"`  // the spill files' size on disk
	// GrowthBytes is by how much committing every open file now would grow
	// the vault: what a vault size quota counts beside the vault's own bytes.
	GrowthBytes     int64 `json:"growth_bytes"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	PeakSpillBytes  int64 `json:"peak_spill_bytes"`
	// StagedBytes are full chunks stored in the vault ahead of their
	// file's commit (see stager), held by the files as hashes only.
	StagedBytes     int64 `json:"staged_bytes"`
	PeakStagedBytes int64 `json:"peak_staged_bytes"`
	// SpillLimit is Options.SpillLimit (0: none beyond the free space of
	// the spill directory, less a margin).
	SpillLimit int64 `json:"spill_limit"`
	// RefusedQuota counts writes refused with EDQUOT (a file or vault size
	// quota); RefusedSpace those refused with ENOSPC (the spill limit, or
	// the spill directory's free space).
	RefusedQuota int64 `json:"refused_quota"`
	RefusedSpace int64 `json:"refused_space"`
}

// buffers is the one account of a mount's unflushed writes, across its
// open files: the memory and spill files they take, and the growth of the
// vault they would commit. It bounds them: the growth by the vault's size
// quota (EDQUOT at write(2)), the spill by Options.SpillLimit and the free
// space of the spill directory (ENOSPC at write(2)), the memory by
// mountMemLimit (the rest spills).
//
// The growth check counts the vault's committed bytes (read with the
// quotas, at most once a second, and fresh before any refusal) plus every
// open file's growth. A flush takes its file's growth out of the count
// before it commits and adds it to the committed bytes after: a check
// meanwhile counts less, never more, than the truth. So a fresh check
// never refuses wrongly; a cached one may let a write through that a
// fresh one would refuse (another path grew the vault within the second:
// a truncate that grows a file), and the transaction of the flush still
// refuses it (EDQUOT at close), as before this accounting.
//
// Concurrency: mu guards every field; it is taken inside openFile.mu and
// fsys.quotaMu, never the other way round. Cost: a few additions per
// write; one statfs(2) per spillGrantMax of spill (more near the margin).
type buffers struct {
	dir   string // where spill files are made
	limit int64  // Options.SpillLimit; 0: none

	mu         sync.Mutex
	mem, spill int64
	growth     int64
	committed  int64 // the vault's bytes as last read, plus this mount's flushes since
	epoch      int64 // counts reads of committed
	grant      int64 // spill bytes the last statfs allowed and not used yet
	peakMem    int64
	peakSpill  int64
	staged     int64
	peakStaged int64
	refusedQ   int64
	refusedS   int64
}

func (b *buffers) stats() BufferStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BufferStats{MemoryBytes: b.mem, SpillBytes: b.spill, GrowthBytes: b.growth,
		PeakMemoryBytes: b.peakMem, PeakSpillBytes: b.peakSpill, SpillLimit: b.limit,
		StagedBytes: b.staged, PeakStagedBytes: b.peakStaged,
		RefusedQuota: b.refusedQ, RefusedSpace: b.refusedS}
}

// takeMem counts n more bytes in memory if the mount's memory limit
// allows them; n < 0 gives bytes back and always succeeds.
func (b *buffers) takeMem(n int64, force bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > 0 && !force && b.mem+n > mountMemLimit {
		return false
	}
	b.mem += n
	b.peakMem = max(b.peakMem, b.mem)
	return true
}

// takeSpill counts n more bytes of spill file, or answers ENOSPC when the
// spill limit or the free space of the spill directory (less the margin)
// has no room for them.
func (b *buffers) takeSpill(n int64) syscall.Errno {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit > 0 && b.spill+n > b.limit {
		b.refusedS++
		return syscall.ENOSPC
	}
	if b.grant < n {
		var st unix.Statfs_t
		if err := unix.Statfs(b.dir, &st); err != nil {
			b.grant = n // the spill's own write will tell
		} else {
			size, avail := int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
			margin := min(size/spillMarginPart, spillMarginMax)
			// Half of what is free: other writers share the file system.
			b.grant = min(max(0, avail-margin)/2, spillGrantMax)
		}
		if b.grant < n {
			b.refusedS++
			return syscall.ENOSPC
		}
	}
	b.grant -= n
	b.spill += n
	b.peakSpill = max(b.peakSpill, b.spill)
	return 0
}

// addStaged counts n more bytes staged (n < 0: committed or dropped).
func (b *buffers) addStaged(n int64) {
	b.mu.Lock()
	b.staged += n
	b.peakStaged = max(b.peakStaged, b.staged)
	b.mu.Unlock()
}

// dropSpill gives back n bytes of spill file (truncated or closed).
func (b *buffers) dropSpill(n int64) {
	b.mu.Lock()
	b.spill -= n
	b.mu.Unlock()
}

// addGrowth changes the counted growth by d (a file's recount).
func (b *buffers) addGrowth(d int64) {
	b.mu.Lock()
	b.growth += d
	b.mu.Unlock()
}

// tryGrowth counts d more bytes of growth unless that takes the vault
// beyond limit (0: no limit).
func (b *buffers) tryGrowth(d, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if limit > 0 && d > 0 && b.committed+b.growth+d > limit {
		return false
	}
	b.growth += d
	return true
}

// setCommitted records the vault's bytes, as just read.
func (b *buffers) setCommitted(bytes int64) {
	b.mu.Lock()
	b.committed = bytes
	b.epoch++
	b.mu.Unlock()
}

// committedEpoch is the epoch a flush notes before it commits.
func (b *buffers) committedEpoch() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch
}

// flushed adds d bytes a flush committed to the committed bytes, unless
// they were read again since epoch (the read may or may not have seen
// them: not adding them can only count less).
func (b *buffers) flushed(d, epoch int64) {
	b.mu.Lock()
	if b.epoch == epoch {
		b.committed += d
	}
	b.mu.Unlock()
}

func (b *buffers) refusedQuota() {
	b.mu.Lock()
	b.refusedQ++
	b.mu.Unlock()
}

// reserveGrowth counts d more bytes of unflushed growth (a write that
// extends a file), or answers EDQUOT when they would take the vault beyond
// its size quota, counting the vault's committed bytes and every open
// file's unflushed growth. A refusal is decided on fresh figures.
func (f *fsys) reserveGrowth(ctx context.Context, d int64) syscall.Errno {
	if d <= 0 {
		f.buf.addGrowth(d)
		return 0
	}
	if f.buf.tryGrowth(d, f.quotas(ctx, false).MaxSizeMB<<20) {
		return 0
	}
	if f.buf.tryGrowth(d, f.quotas(ctx, true).MaxSizeMB<<20) {
		return 0
	}
	f.buf.refusedQuota()
	return syscall.EDQUOT
}

// spillErrno is the errno a writer sees for a failed spill: a full
// spill directory (ENOSPC, or EDQUOT of the host's disk quota, which is
// not the vault's) is ENOSPC; anything else EIO.
func spillErrno(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) && (en == syscall.ENOSPC || en == syscall.EDQUOT) {
		return syscall.ENOSPC
	}
	return syscall.EIO
}
