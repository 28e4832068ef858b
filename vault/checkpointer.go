package vault

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// The write-ahead log's checkpoints: when the log's pages are copied back
// into the vault file.
//
// Why: SQLite copies the log back into the file (a checkpoint) inside the
// commit of whichever transaction makes the log cross wal_autocheckpoint
// pages, and once more when the last connection closes. In a process that
// writes a lot, the mount server above all, that put a copy of the last
// 40 MiB written, read back from the log and written again with two
// fsyncs, into the write path of one unlucky FUSE write (100 MiB written
// in 4 MiB transactions: 2–3 such checkpoints), and up to 64 MiB of it
// into unmount (the final checkpoint at Close).
//
// The fix: StartCheckpointer, which the mount server calls, checkpoints in
// the background: a goroutine with its own connection runs a PASSIVE
// checkpoint (it never blocks a writer or a reader) whenever the log holds
// checkpointLogBytes not yet copied back, and, once no commit came for
// checkpointIdle, a TRUNCATE (that returns at once when a writer or reader
// is busy, and empties the log file), so that Close finds nothing to copy.
// The writers keep their inline checkpoint (wal_autocheckpoint) at
// walBoundBytes, which bounds the log on disk should the background fall
// behind; it then finds most of the log copied back already. Cost: a
// checkpoint still reads back and writes every page once; it now overlaps
// the writes instead of stalling them, on its own connection (its page
// cache: 16 MB), and the log's shared-memory index header (100 bytes) is
// read after each commit to decide. Measured (tests/bench section
// 16-checkpointer, medians of 5, docs/benchmarks.md): after 100 MiB in 4
// MiB transactions, Close 500 ms later 12 ms against 134 ms (quiet
// machine; 80 ms against 419 ms loaded), but Close right after 199 ms
// against 131 ms: it folds what is pending then, 0–50 MiB, where the
// inline checkpoint leaves 20; the writes 673 ms against 647 ms (quiet),
// 1.95 s against 3.23 s (loaded, slow fsync).
//
// Invariant: the log never grows without bound. A process without the
// background checkpointer (every one-shot CLI process) keeps SQLite's own
// automatic checkpoint at walAutoCheckpointBytes; a process with it
// checkpoints in the background and, past walBoundBytes, inline.
// The writers' inline checkpoint stays on: it is the bound.

// walAutoCheckpointBytes is the log size (bytes of pages) at which a
// connection checkpoints inline when no background checkpointer runs:
// 10,000 pages of 4 KiB, SQLite's default wal_autocheckpoint ×10, as
// vaults did before the page size was chosen.
const walAutoCheckpointBytes = 10000 * 4096

// walBoundBytes is the log size at which the writer connection of a
// process with a background checkpointer checkpoints inline all the same:
// the log on disk, and what a writer outrunning the disk leaves to Close,
// stay within what they were without the background (the same 40 MiB;
// moving the inline checkpoint to 64 MiB made neither the writes nor
// Close measurably better, and to 256 MiB left Close 1.29 s against 0.36
// s, in a run where Close still interrupted a checkpoint under way). SQLite skips an inline checkpoint that finds
// another under way, and the log restarts only once all of it is copied
// back, which a background checkpoint chasing a writer never reaches: so
// the background starts none while the log is past the bound, and the
// writer's next commit copies the rest and lets the log restart (the
// bound measured: a 103 MiB log after a 100 MiB write without this rule,
// bursts of writes outrunning checkpoints on a loaded machine).
const walBoundBytes = walAutoCheckpointBytes

// checkpointLogBytes is how much not yet copied back makes the background
// checkpointer run a PASSIVE checkpoint.
const checkpointLogBytes = 16 << 20

// checkpointIdle is how long after the last commit the background
// checkpointer empties the log (TRUNCATE).
const checkpointIdle = 200 * time.Millisecond

// autoCheckpointPages is bytes of log in pages of pageSize, at least 1.
func autoCheckpointPages(bytes, pageSize int64) int64 {
	if pageSize <= 0 {
		pageSize = 4096
	}
	return max(bytes/pageSize, 1)
}

// ckptLoop is the background checkpointer of a Vault (StartCheckpointer).
type ckptLoop struct {
	kick chan struct{}
	stop chan struct{} // closed by stopCheckpointer
	done chan struct{}

	mu     sync.Mutex
	passes int64 // checkpoints run
	err    error // of the last one
}

// StartCheckpointer makes this Vault checkpoint the write-ahead log in the
// background of this process, and checkpoint inline only past
// walBoundBytes (why, the cost and the invariant: the comment at the head
// of this file); the process serving a writer mount calls it. Close stops
// it, letting a checkpoint under way finish, and closes its connection.
// Calling it again, or on a closed, read-only or replicated Vault (its log is
// the replicator's: replica.go), is a no-op. A checkpoint that fails (busy, or the disk full) is
// kept for CheckpointerStatus and tried again after the next commit; it
// never fails a write.
func (v *Vault) StartCheckpointer() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ckpt.Load() != nil || v.closed || v.readOnly || v.replicated {
		return
	}
	l := &ckptLoop{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	v.ckpt.Store(l)
	go func() {
		defer close(l.done)
		l.run(v)
	}()
}

// CheckpointerStatus returns how many background checkpoints ran and the
// error of the last one, if any.
func (v *Vault) CheckpointerStatus() (passes int64, err error) {
	l := v.ckpt.Load()
	if l == nil {
		return 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.passes, l.err
}

// kickCheckpointer wakes the background checkpointer, if started, after a
// commit. It never blocks.
func (v *Vault) kickCheckpointer() {
	l := v.ckpt.Load()
	if l == nil {
		return
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// stopCheckpointer stops the background checkpointer, if started, and
// waits for it.
func (v *Vault) stopCheckpointer() {
	l := v.ckpt.Swap(nil)
	if l == nil {
		return
	}
	close(l.stop)
	<-l.done
}

func (l *ckptLoop) record(err error) {
	l.mu.Lock()
	l.passes++
	l.err = err
	l.mu.Unlock()
}

// run is the checkpointer's loop: a PASSIVE checkpoint when a commit left
// checkpointLogBytes to copy back, a TRUNCATE once commits pause. A
// checkpoint under way when stop closes is finished, not interrupted:
// SQLite records a checkpoint's progress only at its end, so an
// interrupted one would leave all its copying to Close.
func (l *ckptLoop) run(v *Vault) {
	ctx := context.Background()
	db, err := sql.Open(writerDriverName, dsn(v.path, true))
	if err != nil {
		l.record(storageErr("checkpoint", err))
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		l.record(storageErr("checkpoint", err))
		return
	}
	defer conn.Close()
	// Never wait for a writer or reader: the next commit brings another
	// chance. (The connection's own automatic checkpoint is moot: it never
	// writes.)
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		l.record(storageErr("checkpoint", err))
		return
	}
	shm, _ := os.Open(v.path + "-shm")
	if shm != nil {
		defer shm.Close()
	}
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	dirty := false // commits since the last TRUNCATE
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			dirty = true
			idle.Reset(checkpointIdle)
			size, pending, ok := walPending(shm)
			if ok && (pending < checkpointLogBytes || size >= walBoundBytes) {
				continue // not worth it yet, or the writer's to do (walBoundBytes)
			}
			l.record(checkpoint(ctx, conn, "PASSIVE"))
		case <-idle.C:
			if !dirty {
				continue
			}
			err := checkpoint(ctx, conn, "TRUNCATE")
			if err == nil {
				dirty = false
			} else {
				// Busy: copy what can be copied; the next pause or commit
				// tries again.
				idle.Reset(checkpointIdle)
				err = errors.Join(err, checkpoint(ctx, conn, "PASSIVE"))
			}
			l.record(err)
		}
	}
}

// errCheckpointBusy is a checkpoint that could not finish for a writer or
// reader using the log.
var errCheckpointBusy = errors.New("checkpoint: log in use")

// checkpoint runs PRAGMA wal_checkpoint(mode) on conn.
func checkpoint(ctx context.Context, conn *sql.Conn, mode string) error {
	var busy, logFrames, done int64
	err := conn.QueryRowContext(ctx, fmt.Sprintf("PRAGMA wal_checkpoint(%s)", mode)).Scan(&busy, &logFrames, &done)
	if err != nil {
		return storageErr("checkpoint", err)
	}
	if busy != 0 {
		return errCheckpointBusy
	}
	return nil
}

// walPending reads, from the log's shared-memory index (shm, the vault's
// -shm file), how many bytes of frames the log holds since it last
// restarted (size), and how many of them are not yet copied back into the
// vault file (pending). ok is false when it cannot tell (no index, or a
// torn read): the caller checkpoints then.
//
// The index's layout is SQLite's file format (sqlite.org/walformat.html,
// "The WAL-Index Format"): two copies of a 48-byte header in native byte
// order, with the page size (u16 at 14, 1 meaning 65536) and mxFrame, the
// last valid frame (u32 at 16); then the checkpoint information, whose
// first field is nBackfill (u32 at 96), the frames already copied back.
func walPending(shm *os.File) (size, pending int64, ok bool) {
	if shm == nil {
		return 0, 0, false
	}
	var b [100]byte
	if _, err := shm.ReadAt(b[:], 0); err != nil { // ReadAt fails on a short read
		return 0, 0, false
	}
	ne := binary.NativeEndian
	if string(b[:48]) != string(b[48:96]) { // being rewritten: ask again later
		return 0, 0, false
	}
	sz := int64(ne.Uint16(b[14:]))
	if sz == 1 {
		sz = 65536
	}
	mx, backfill := int64(ne.Uint32(b[16:])), int64(ne.Uint32(b[96:]))
	frame := sz + 24 // a frame is a 24-byte header and a page
	if backfill > mx {
		return mx * frame, 0, true // the log restarted; nothing left
	}
	return mx * frame, (mx - backfill) * frame, true
}
