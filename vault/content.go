package vault

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"errors"
	"io"

	"avfs/wire"
)

const hashLen = sha256.Size

// zeroHash marks a chunk that is all zeros (a hole); it is never stored.
var zeroHash = make([]byte, hashLen)

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// putChunk stores data (deduplicated by hash) and returns its hash.
func (t *txn) putChunk(data []byte) ([]byte, error) {
	if isZero(data) {
		return zeroHash, nil
	}
	sum := sha256.Sum256(data)
	if _, err := t.tx.ExecContext(t.ctx, "INSERT OR IGNORE INTO chunks (hash, size, data) VALUES (?, ?, ?)", sum[:], len(data), data); err != nil {
		return nil, err
	}
	return sum[:], nil
}

// chunkData returns the stored bytes of a chunk, from this vault or, for a
// fork, from the ancestor that owns it.
func (v *Vault) chunkData(ctx ctxT, q querier, hash []byte) ([]byte, error) {
	if bytes.Equal(hash, zeroHash) {
		return nil, nil
	}
	var data []byte
	err := q.QueryRowContext(ctx, "SELECT data FROM chunks WHERE hash = ?", hash).Scan(&data)
	if err == nil {
		return data, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	p, perr := v.parentVault(ctx)
	if perr != nil {
		return nil, perr
	}
	if p == nil {
		return nil, wire.Errorf(wire.CodeIntegrity, "chunk %x is missing", hash[:8])
	}
	return p.chunkData(ctx, p.r, hash)
}

// readAt reads from a file's content at off. It returns io.EOF at or past the end.
func (v *Vault) readAt(ctx ctxT, q querier, in *inode, p []byte, off int64) (int, error) {
	if off >= in.size {
		return 0, io.EOF
	}
	end := off + int64(len(p))
	if end > in.size {
		end = in.size
	}
	n := 0
	for pos := off; pos < end; {
		i := pos / ChunkSize
		cs := i * ChunkSize
		ce := cs + ChunkSize
		if ce > end {
			ce = end
		}
		var data []byte
		if int((i+1)*hashLen) <= len(in.chunks) {
			d, err := v.chunkData(ctx, q, in.chunks[i*hashLen:(i+1)*hashLen])
			if err != nil {
				return n, err
			}
			data = d
		}
		// Bytes past the stored data (holes, zero tails) read as zeros.
		dst := p[pos-off : ce-off]
		from := pos - cs
		if from < int64(len(data)) {
			c := copy(dst, data[from:])
			clear(dst[c:])
		} else {
			clear(dst)
		}
		n += len(dst)
		pos = ce
	}
	if int64(n) < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

// writeAt writes p into in's content at off, storing only the chunks it touches.
func (t *txn) writeAt(in *inode, p []byte, off int64) error {
	if in.kind != KindFile {
		return wire.Errorf(wire.CodeIsDir, "not a regular file")
	}
	if off < 0 {
		return wire.Errorf(wire.CodeInvalidInput, "negative offset")
	}
	if len(p) == 0 {
		return nil
	}
	end := off + int64(len(p))
	newSize := max(in.size, end)
	if err := t.checkGrowth(in, newSize); err != nil {
		return err
	}
	first, last := off/ChunkSize, (end-1)/ChunkSize
	chunks := in.chunks
	if need := int((last + 1) * hashLen); len(chunks) < need {
		grown := make([]byte, need)
		copy(grown, chunks)
		chunks = grown // new slots are zeroHash (holes)
	} else {
		chunks = bytes.Clone(chunks)
	}
	for i := first; i <= last; i++ {
		cs := i * ChunkSize
		span := min(int64(ChunkSize), newSize-cs)
		var buf []byte
		if off <= cs && end >= cs+span {
			buf = p[cs-off : cs-off+span]
		} else {
			old, err := t.v.chunkData(t.ctx, t.tx, chunks[i*hashLen:(i+1)*hashLen])
			if err != nil {
				return err
			}
			buf = make([]byte, max(int64(len(old)), min(span, end-cs)))
			copy(buf, old)
			from := max(off, cs)
			copy(buf[from-cs:], p[from-off:min(end, cs+span)-off])
		}
		h, err := t.putChunk(buf)
		if err != nil {
			return err
		}
		copy(chunks[i*hashLen:], h)
	}
	in.chunks = chunks
	in.size = newSize
	in.mtime, in.ctime = t.now, t.now
	return nil
}

// truncate sets in's size, dropping chunks past the end.
func (t *txn) truncate(in *inode, size int64) error {
	if in.kind != KindFile {
		return wire.Errorf(wire.CodeIsDir, "not a regular file")
	}
	if size < 0 {
		return wire.Errorf(wire.CodeInvalidInput, "negative size")
	}
	if err := t.checkGrowth(in, size); err != nil {
		return err
	}
	if size < in.size {
		n := (size + ChunkSize - 1) / ChunkSize
		chunks := bytes.Clone(in.chunks[:min(len(in.chunks), int(n*hashLen))])
		if tail := size % ChunkSize; tail != 0 && int(n*hashLen) <= len(chunks) {
			i := n - 1
			old, err := t.v.chunkData(t.ctx, t.tx, chunks[i*hashLen:(i+1)*hashLen])
			if err != nil {
				return err
			}
			if int64(len(old)) > tail {
				h, err := t.putChunk(old[:tail])
				if err != nil {
					return err
				}
				copy(chunks[i*hashLen:], h)
			}
		}
		in.chunks = chunks
	}
	in.size = size
	in.mtime, in.ctime = t.now, t.now
	return nil
}

// writeAll replaces in's content with everything read from r.
func (t *txn) writeAll(in *inode, r io.Reader) error {
	if in.kind != KindFile {
		return wire.Errorf(wire.CodeIsDir, "not a regular file")
	}
	var chunks []byte
	var size int64
	buf := make([]byte, ChunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			size += int64(n)
			if err := t.checkGrowth(in, size); err != nil {
				return err
			}
			h, perr := t.putChunk(buf[:n])
			if perr != nil {
				return perr
			}
			chunks = append(chunks, h...)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return wire.Errorf(wire.CodeHostIO, "read content: %w", err)
		}
	}
	if chunks == nil {
		chunks = []byte{}
	}
	in.chunks = chunks
	in.size = size
	in.mtime, in.ctime = t.now, t.now
	return nil
}

// checkGrowth fails early, before data is stored, when growing in to size
// would break the file size or vault size quota.
func (t *txn) checkGrowth(in *inode, size int64) error {
	if size <= in.oldSize {
		return nil
	}
	if t.st.maxFileBytes > 0 && size > t.st.maxFileBytes {
		return wire.Errorf(wire.CodeQuotaExceeded, "file size quota exceeded: %d bytes would exceed max_file_size_mb=%d", size, t.st.maxFileBytes>>20).
			With("quota", "max_file_size_mb").With("limit", t.st.maxFileBytes>>20).With("size", size)
	}
	if t.st.maxBytes > 0 && t.st.bytes+size-in.oldSize > t.st.maxBytes {
		return wire.Errorf(wire.CodeQuotaExceeded, "vault size quota exceeded: %d bytes would exceed max_size_mb=%d", t.st.bytes+size-in.oldSize, t.st.maxBytes>>20).
			With("quota", "max_size_mb").With("limit", t.st.maxBytes>>20).With("bytes", t.st.bytes+size-in.oldSize)
	}
	return nil
}
