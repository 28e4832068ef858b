package mount

import (
	"context"
	"sync"
	"syscall"

	"avfs/vault"
)

// Streaming writes: a chunk of an open file that becomes full (all 64
// KiB written) is handed to the mount's stager, which stores it in the
// vault ahead of the file's commit (vault.StageChunks), so that a big
// write reaches the vault as it happens instead of at close:
//
//   - Cost: one write transaction per batch of up to stageBatch chunks,
//     on one goroutine per mount, overlapping the FUSE writes (the
//     hashing happens there too, outside the file's lock); a read of a
//     staged chunk before the commit reads it back from the vault, and a
//     write into one loads it back into memory.
//   - Fix: without it every unflushed chunk stays in memory (then in a
//     spill file) until flush, which stores them all in one transaction:
//     for 100 MiB, 71 MB spilled out and back and 3.3× the time SQLite
//     needs for the same bytes. With it, the file keeps only the hash of
//     a staged chunk (chunkBuf.hash), and its commit writes the content
//     map (vault.PersistStaged): memory holds the queue and the
//     partial chunks, and a sequential writer never spills.
//   - Invariant: a chunkBuf with a hash names a chunk stored and recorded
//     in the vault's staged table for the file's owner at the file's
//     current epoch, which nothing frees before the commit that refers to
//     it (see vault.StageChunks). A stage result is installed only when
//     the chunk did not change since it was queued (seq, queued) and no
//     flush began meanwhile (epoch): a flush's commit releases the rows of
//     the epochs before it. Queue bounds memory: write(2) waits while the
//     queue is full (back-pressure), never holding the file's lock.
//
// A failed stage (a full disk, an I/O error) keeps the chunk in memory:
// the flush commits it as data, and the next write(2) of the file answers
// the error (ENOSPC, EIO), once. What an application flushed is in the
// vault as before; what it did not flush is lost with a killed mount, and
// its staged chunks are freed by the next gc.

// Stager bounds: chunks waiting in the queue, and chunks stored per
// transaction.
const (
	stageQueue = 64
	stageBatch = 64
)

// stageJob is one full chunk to stage: chunk i of of, as cb with seq, its
// data (cb.data when queued; the job's own once the chunk is written
// again, see unshare).
type stageJob struct {
	of   *openFile
	i    int64
	cb   *chunkBuf
	seq  uint64
	data []byte
}

// stager stores the full chunks of a mount's open files in the vault in
// the background, in batches (see the comment above).
type stager struct {
	store Store
	jobs  chan stageJob
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func newStager(store Store) *stager {
	s := &stager{store: store, jobs: make(chan stageJob, stageQueue), quit: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// send queues jobs, waiting while the queue is full; once the stager has
// stopped, the jobs fail (their chunks stay in memory).
func (s *stager) send(jobs []stageJob) {
	for k, j := range jobs {
		select {
		case s.jobs <- j:
		case <-s.quit:
			for _, j := range jobs[k:] {
				j.of.staged(j, nil, 0, errStagerStopped)
			}
			return
		}
	}
}

// stop stops the stager once and waits for it; queued jobs fail.
func (s *stager) stop() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}

type stagerStopped struct{}

func (stagerStopped) Error() string { return "the mount's stager has stopped" }

var errStagerStopped error = stagerStopped{}

func (s *stager) run() {
	defer close(s.done)
	ctx := context.Background()
	batch := make([]stageJob, 0, stageBatch)
	items := make([]vault.StagedChunk, 0, stageBatch)
	epochs := make([]int64, 0, stageBatch)
	for {
		select {
		case <-s.quit:
			for {
				select {
				case j := <-s.jobs:
					j.of.staged(j, nil, 0, errStagerStopped)
				default:
					return
				}
			}
		case j := <-s.jobs:
			batch = append(batch[:0], j)
		}
	fill:
		for len(batch) < stageBatch {
			select {
			case j := <-s.jobs:
				batch = append(batch, j)
			default:
				break fill
			}
		}
		items, epochs = items[:0], epochs[:0]
		for _, j := range batch {
			owner, epoch := j.of.stageOwner()
			items = append(items, vault.StagedChunk{Owner: owner, Epoch: epoch, Data: j.data})
			epochs = append(epochs, epoch)
		}
		err := s.store.StageChunks(ctx, items)
		for k, j := range batch {
			j.of.staged(j, items[k].Hash, epochs[k], err)
			batch[k] = stageJob{}
			items[k] = vault.StagedChunk{}
		}
	}
}

// stageOwner returns the file's stage owner (made on first use) and its
// current epoch, and notes that rows of that epoch may exist.
func (of *openFile) stageOwner() (vault.StageOwner, int64) {
	of.mu.Lock()
	defer of.mu.Unlock()
	if of.owner == 0 {
		of.owner = vault.NewStageOwner()
	}
	of.rowsEpoch = max(of.rowsEpoch, of.epoch)
	return of.owner, of.epoch
}

// queueLocked queues chunk i (cb, full and in memory) for staging; the
// job is sent by sendJobs once of.mu is released. of.mu is held.
func (of *openFile) queueLocked(i int64, cb *chunkBuf) {
	if of.n.fsys.stager == nil || of.detached || cb.queued || cb.hole || cb.data == nil || cb.length != chunkSize {
		return
	}
	cb.queued = true
	of.enqueued++
	of.toSend = append(of.toSend, stageJob{of: of, i: i, cb: cb, seq: cb.seq, data: cb.data[:chunkSize]})
}

// takeJobs returns the jobs queueLocked collected; of.mu is held.
func (of *openFile) takeJobs() []stageJob {
	jobs := of.toSend
	of.toSend = nil
	return jobs
}

// sendJobs hands jobs to the stager; of.mu must not be held (it waits
// while the queue is full, and the stager takes the lock).
func (of *openFile) sendJobs(jobs []stageJob) {
	if len(jobs) > 0 {
		of.n.fsys.stager.send(jobs)
	}
}

// staged installs the result of staging job j at epoch: the chunk keeps
// only hash, its memory given back, unless it changed or a flush began
// since it was queued. On failure the chunk stays in memory and err is
// answered by the next write.
func (of *openFile) staged(j stageJob, hash []byte, epoch int64, err error) {
	of.mu.Lock()
	defer of.mu.Unlock()
	defer of.stageCond.Broadcast()
	of.completed++
	cb := of.dirty[j.i]
	same := cb == j.cb && cb.seq == j.seq && cb.queued
	if same {
		cb.queued = false
	}
	if err != nil {
		if err != errStagerStopped && of.stageErr == nil {
			of.stageErr = err
		}
		return
	}
	if !same || epoch != of.epoch || cb.data == nil {
		return
	}
	of.memBytes -= chunkSize
	of.n.fsys.buf.takeMem(-chunkSize, true)
	of.n.fsys.buf.addStaged(chunkSize)
	if cap(cb.data) == chunkSize {
		chunkPool.Put((*[chunkSize]byte)(cb.data[:chunkSize]))
	}
	cb.data, cb.hash = nil, hash
}

// chunkPool holds the buffers of staged chunks for new ones: a long write
// reuses a few instead of making a new 64 KiB of garbage per chunk, which
// kept the mount server's heap (and its resident memory) at about twice
// what it held.
var chunkPool = sync.Pool{New: func() any { return new([chunkSize]byte) }}

// newChunkBuf returns a zeroed buffer of n bytes (see bufLen), a whole
// chunk's from chunkPool.
func newChunkBuf(n int) []byte {
	if n < chunkSize {
		return make([]byte, n)
	}
	b := chunkPool.Get().(*[chunkSize]byte)
	clear(b[:])
	return b[:]
}

// waitStaged waits until every chunk queued before the call is staged
// (or failed); it sends the jobs not sent yet first. of.mu must not be
// held.
func (of *openFile) waitStaged() {
	of.mu.Lock()
	jobs := of.takeJobs()
	target := of.enqueued
	of.mu.Unlock()
	of.sendJobs(jobs)
	of.mu.Lock()
	for of.completed < target {
		of.stageCond.Wait()
	}
	of.mu.Unlock()
}

// unshare makes cb's memory the file's own before it is changed in place:
// a queued chunk's buffer belongs to its stage job until staged, so the
// chunk gets a copy (and the job's result will not be installed). of.mu
// is held.
func (of *openFile) unshare(cb *chunkBuf) {
	if cb.queued && cb.data != nil {
		cb.data = append(make([]byte, 0, cap(cb.data)), cb.data...)
		cb.queued = false
	}
}

// unstage turns a staged chunk back into one held by the file, its
// content data (from chunkData), kept in memory or spilled; of.mu is held.
func (of *openFile) unstage(cb *chunkBuf, data []byte) syscall.Errno {
	if cb.hash == nil {
		return 0
	}
	if en := of.keep(cb, data); en != 0 {
		return en
	}
	cb.hash = nil
	of.n.fsys.buf.addStaged(-chunkSize)
	return 0
}
