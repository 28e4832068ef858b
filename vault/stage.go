package vault

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"sync/atomic"
	"time"

	"avfs/wire"
)

// Staged chunks: a writer stores a file's chunks as they fill, ahead of
// the commit that makes the file refer to them, so that a big write is
// not held in memory or in temporary files until close and then stored
// in one long transaction.
//
//   - Cost: one write transaction per batch of chunks (StageChunks), each
//     hashed before the transaction; one row of the staged table per chunk
//     (its hash and owner, about 60 bytes), deleted by the commit.
//   - Fix: a staged chunk is in the chunks table (counted in
//     state.chunk_bytes) but no inode or version refers to it yet, and
//     dedup means it may share its hash with a chunk retention or gc is
//     about to free. The staged table names every such chunk with its
//     owner (process, host, a number unique in the process, the owner's
//     epoch): retention, gc and GCDryRun take every hash in it as
//     referenced, in any process.
//   - Invariant: a chunk hash that a writer holds as staged, and has not
//     committed, has a row in staged whose epoch is the owner's current
//     one at staging time. The commit of a file (FileCommit.Owner, Epoch)
//     deletes its owner's rows up to Epoch in the transaction that makes
//     the inode refer to them; ReleaseStaged deletes an owner's rows (the
//     file closed); Unlock(LockMount) deletes the rows of this process (the
//     mount went); Lock(LockMount) and GC delete the rows of processes of
//     this host that are dead (a killed mount). A pid reused by a live
//     process keeps a dead owner's rows until that process goes: they then
//     only delay freeing chunks, never lose one.
//
// What was staged and never committed is lost with the owner's session,
// as unflushed writes always were; the chunks themselves are freed by
// the next gc (retention frees only chunks of versions it removes).

// StageOwner names one writer of staged chunks (an open file) within this
// process; 0 is none.
type StageOwner int64

var stageOwners atomic.Int64

// NewStageOwner returns an owner number not used before in this process.
func NewStageOwner() StageOwner { return StageOwner(stageOwners.Add(1)) }

// StagedChunk is one chunk to stage: Owner and Epoch say whose it is, Data
// its content (at most ChunkSize bytes); StageChunks sets Hash.
type StagedChunk struct {
	Owner StageOwner
	Epoch int64
	Data  []byte
	Hash  []byte
}

// StageChunks stores chunks (deduplicated by hash, a chunk of zeros not at
// all: its hash is the hole's) and records them as staged, in one write
// transaction, and sets each one's Hash. Hashing happens before the
// transaction. It fails like any write: no_space on a full disk,
// vault_busy, storage errors; then nothing of the batch is stored. It
// never checks quotas: staged bytes are not file bytes until a commit
// (which checks them).
func (v *Vault) StageChunks(ctx context.Context, chunks []StagedChunk) error {
	for i := range chunks {
		c := &chunks[i]
		if len(c.Data) > ChunkSize {
			return wire.Errorf(wire.CodeInvalidInput, "stage chunks: a chunk of %d bytes is larger than %d", len(c.Data), ChunkSize)
		}
		if isZero(c.Data) {
			c.Hash = zeroHash
			continue
		}
		sum := sha256.Sum256(c.Data)
		c.Hash = sum[:]
	}
	pid, host := os.Getpid(), hostname()
	return v.update(ctx, "stage chunks", func(t *txn) error {
		t.stageOnly = true
		for _, c := range chunks {
			if c.Owner == 0 {
				return wire.Errorf(wire.CodeInvalidInput, "stage chunks: no owner")
			}
			if bytes.Equal(c.Hash, zeroHash) {
				continue
			}
			res, err := t.tx.ExecContext(t.ctx, "INSERT OR IGNORE INTO chunks (hash, size, data) VALUES (?, ?, ?)", c.Hash, len(c.Data), c.Data)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err == nil && n > 0 {
				t.st.chunkBytes += int64(len(c.Data))
			}
			if _, err := t.tx.ExecContext(t.ctx, "INSERT OR IGNORE INTO staged (pid, host, owner, epoch, hash) VALUES (?, ?, ?, ?, ?)",
				pid, host, int64(c.Owner), c.Epoch, c.Hash); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReleaseStaged deletes owner's staged rows: its file is closed, and what
// it staged and did not commit is no longer needed.
func (v *Vault) ReleaseStaged(ctx context.Context, owner StageOwner) error {
	return v.update(ctx, "release staged chunks", func(t *txn) error {
		_, err := t.tx.ExecContext(ctx, "DELETE FROM staged WHERE pid = ? AND host = ? AND owner = ?", os.Getpid(), hostname(), int64(owner))
		return err
	})
}

// releaseStaged deletes, in t, owner's staged rows up to epoch.
func (t *txn) releaseStaged(owner StageOwner, epoch int64) error {
	if owner == 0 {
		return nil
	}
	_, err := t.tx.ExecContext(t.ctx, "DELETE FROM staged WHERE pid = ? AND host = ? AND owner = ? AND epoch <= ?", os.Getpid(), hostname(), int64(owner), epoch)
	return err
}

// releaseProcessStaged deletes, in t, every staged row of this process:
// its writer mount went.
func (t *txn) releaseProcessStaged() error {
	_, err := t.tx.ExecContext(t.ctx, "DELETE FROM staged WHERE pid = ? AND host = ?", os.Getpid(), hostname())
	return err
}

// sweepStaged deletes, in t, the staged rows of processes of this host
// that no longer run, and returns how many it deleted.
func (t *txn) sweepStaged() (int64, error) {
	rows, err := t.tx.QueryContext(t.ctx, "SELECT DISTINCT pid FROM staged WHERE host = ?", hostname())
	if err != nil {
		return 0, err
	}
	var dead []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			rows.Close()
			return 0, err
		}
		if !(Holder{PID: pid, Host: hostname()}).alive() {
			dead = append(dead, pid)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var n int64
	for _, pid := range dead {
		r, err := t.tx.ExecContext(t.ctx, "DELETE FROM staged WHERE pid = ? AND host = ?", pid, hostname())
		if err != nil {
			return n, err
		}
		k, _ := r.RowsAffected()
		n += k
	}
	return n, nil
}

// stagedHashes adds to set every hash in the staged table but those of
// dead processes of this host (garbage the next sweepStaged removes):
// chunks a writer stored ahead of its commit, which nothing may free.
func stagedHashes(ctx context.Context, q querier, set map[string]struct{}) error {
	rows, err := q.QueryContext(ctx, "SELECT pid, host, hash FROM staged")
	if err != nil {
		return err
	}
	defer rows.Close()
	alive := map[Holder]bool{}
	for rows.Next() {
		var h []byte
		var who Holder
		if err := rows.Scan(&who.PID, &who.Host, &h); err != nil {
			return err
		}
		ok, seen := alive[who]
		if !seen {
			ok = who.alive()
			alive[who] = ok
		}
		if ok {
			set[string(h)] = struct{}{}
		}
	}
	return rows.Err()
}

// StagedCount returns how many staged rows the vault holds (all owners).
func (v *Vault) StagedCount(ctx context.Context) (int64, error) {
	var n int64
	err := v.view(ctx, "count staged chunks", func(q querier, _ state) error {
		return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM staged").Scan(&n)
	})
	return n, err
}

// ChunkByHash returns the stored data of the chunk hash (nil for the hole's
// hash), verified like every chunk read (verifyChunk): integrity_failed
// when it is damaged, or not stored here nor, for a fork, in its
// ancestors.
func (v *Vault) ChunkByHash(ctx context.Context, hash []byte) ([]byte, error) {
	data, err := v.chunkData(ctx, v.r, hash)
	if err != nil {
		return nil, storageErr("read chunk", err)
	}
	return data, nil
}

// Chunk is one chunk of a file's new content for a commit: its Data, or
// the Hash of a chunk already stored by StageChunks (Data is then
// ignored).
type Chunk struct {
	Data []byte
	Hash []byte
}

// FileCommit is what PersistStaged and CreateFileStaged commit: the file's
// new Size, the Indexes of the chunks that changed and Chunk(i), their
// content (called once per index inside the transaction; bytes past Size
// ignored), the new Mtime when non-zero; and, when Owner is not 0, the
// owner's staged rows up to Epoch, released in the same transaction.
type FileCommit struct {
	Size    int64
	Indexes []int64
	Chunk   func(i int64) (Chunk, error)
	Mtime   time.Time
	Owner   StageOwner
	Epoch   int64
}

// dataCommit is the FileCommit of Persist and CreateFile: chunks as data.
func dataCommit(size int64, indexes []int64, chunk func(i int64) ([]byte, error), mtime time.Time) FileCommit {
	return FileCommit{Size: size, Indexes: indexes, Mtime: mtime, Chunk: func(i int64) (Chunk, error) {
		d, err := chunk(i)
		return Chunk{Data: d}, err
	}}
}
