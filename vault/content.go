package vault

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

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
	res, err := t.tx.ExecContext(t.ctx, "INSERT OR IGNORE INTO chunks (hash, size, data) VALUES (?, ?, ?)", sum[:], len(data), data)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		t.st.chunkBytes += int64(len(data))
	}
	return sum[:], nil
}

// verifyChunk checks data, read from the chunks table for the chunk whose
// identity is hash and whose recorded length is size, before anything uses
// it: its length must be size and its SHA-256 must be hash. The hash is the
// chunk's identity, so this is as strong as content addressing itself. It
// fails with integrity_failed, details naming the chunk (its hash, hex).
//
// Every read of chunk data (chunkData, the batched read in readAt, vault
// check) goes through it: no path hands on, copies or re-stores bytes of a
// chunk it has not verified, not even part of them.
func verifyChunk(hash []byte, size int64, data []byte) error {
	if why := chunkFault(hash, size, data); why != "" {
		return chunkDamaged(hash, why)
	}
	return nil
}

// chunkFault says what is wrong with data as the chunk hash of size bytes,
// "" when nothing is (verifyChunk).
func chunkFault(hash []byte, size int64, data []byte) string {
	if int64(len(data)) != size {
		return fmt.Sprintf("%d bytes stored where %d are recorded", len(data), size)
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], hash) {
		return "its data does not match its hash"
	}
	return ""
}

// chunkDamaged is the integrity_failed error of a chunk whose stored data
// is not what its hash names.
func chunkDamaged(hash []byte, why string) *wire.Error {
	return wire.Errorf(wire.CodeIntegrity, "chunk %x is damaged: %s", hash[:min(8, len(hash))], why).
		With("chunk", hex.EncodeToString(hash))
}

// withFile adds the file's path (and more detail, as key, value pairs) to
// an integrity_failed error, when err is one and does not name a path yet.
func withFile(err error, path string, kv ...any) error {
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeIntegrity {
		return err
	}
	if _, ok := we.Details["path"]; !ok && path != "" {
		we.With("path", path)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			if _, set := we.Details[k]; !set {
				we.With(k, kv[i+1])
			}
		}
	}
	return err
}

// chunkData returns the stored bytes of a chunk, from this vault or, for a
// fork, from the ancestor that owns it, verified (verifyChunk): it fails
// with integrity_failed when they are damaged, and never returns them.
func (v *Vault) chunkData(ctx ctxT, q querier, hash []byte) ([]byte, error) {
	if bytes.Equal(hash, zeroHash) {
		return nil, nil
	}
	var data []byte
	var size int64
	err := q.QueryRowContext(ctx, "SELECT size, data FROM chunks WHERE hash = ?", hash).Scan(&size, &data)
	if err == nil {
		if err := verifyChunk(hash, size, data); err != nil {
			return nil, err
		}
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
		return nil, wire.Errorf(wire.CodeIntegrity, "chunk %x is missing", hash[:8]).With("chunk", hex.EncodeToString(hash))
	}
	return p.chunkData(ctx, p.r, hash)
}

// readBatch is the number of chunks readAt fetches with one query.
const readBatch = 16

// readAt reads from a file's content at off. It returns io.EOF at or past the end.
// The chunks it needs are fetched with one query (a FUSE read asks for up
// to 1 MiB, 16 chunks): one statement per chunk costs more than the copy.
//
// Every chunk is verified (verifyChunk) before any of its bytes is copied
// into p. A damaged chunk fails the read with integrity_failed (details: the
// chunk, its offset in the file); n then counts only the bytes before that
// chunk, and p never holds a byte of it.
func (v *Vault) readAt(ctx ctxT, q querier, in *inode, p []byte, off int64) (int, error) {
	if off >= in.size {
		return 0, io.EOF
	}
	end := off + int64(len(p))
	if end > in.size {
		end = in.size
	}
	if batch := int64(readBatch * ChunkSize); end-off > batch {
		// Long reads go by batches of chunks: a query of bounded size.
		n := 0
		for pos := off; pos < end; {
			next := min((pos/batch+1)*batch, end)
			k, err := v.readAt(ctx, q, in, p[pos-off:next-off], pos)
			n += k
			if err != nil && err != io.EOF {
				return n, err
			}
			pos = next
		}
		if int64(n) < int64(len(p)) {
			return n, io.EOF
		}
		return n, nil
	}
	// region is the part of p that chunk hash (nil: a hole) fills, from
	// byte from of the chunk on.
	type region struct {
		dst  []byte
		from int64
		hash []byte
		off  int64 // the chunk's offset in the file
		done bool
		err  error // the chunk is damaged: nothing of it is copied
	}
	var regions []region
	for pos := off; pos < end; {
		i := pos / ChunkSize
		cs := i * ChunkSize
		ce := min(cs+ChunkSize, end)
		r := region{dst: p[pos-off : ce-off], from: pos - cs, off: cs}
		if int((i+1)*hashLen) <= len(in.chunks) {
			if h := in.chunks[i*hashLen : (i+1)*hashLen]; !bytes.Equal(h, zeroHash) {
				r.hash = h
			}
		}
		regions = append(regions, r)
		pos = ce
	}
	// fill copies data into r; bytes past it (holes, zero tails) read as zeros.
	fill := func(r *region, data []byte) {
		if r.from < int64(len(data)) {
			c := copy(r.dst, data[r.from:])
			clear(r.dst[c:])
		} else {
			clear(r.dst)
		}
		r.done = true
	}
	// The chunks of a fork may be its parent's (and so on up): what one
	// vault lacks is asked of the next.
	src, srcQ := v, q
	for {
		var hashes []any
		for i := range regions {
			r := &regions[i]
			if r.hash != nil && !r.done && r.err == nil && !slices.ContainsFunc(hashes, func(h any) bool { return bytes.Equal(h.([]byte), r.hash) }) {
				hashes = append(hashes, r.hash)
			}
		}
		if len(hashes) < 2 && src == v {
			break // one chunk: chunkData below, one statement as well
		}
		if len(hashes) == 0 {
			break
		}
		rows, err := srcQ.QueryContext(ctx, "SELECT hash, size, data FROM chunks WHERE hash IN (?"+strings.Repeat(", ?", len(hashes)-1)+")", hashes...)
		if err != nil {
			return 0, err
		}
		for rows.Next() {
			var h, data sql.RawBytes // copied into p before the next row: no copy of its own
			var size int64
			if err := rows.Scan(&h, &size, &data); err != nil {
				rows.Close()
				return 0, err
			}
			why := chunkFault(h, size, data)
			for i := range regions {
				r := &regions[i]
				if r.done || r.err != nil || !bytes.Equal(r.hash, h) {
					continue
				}
				if why != "" {
					// Damaged here: not looked for in a parent either.
					r.err = chunkDamaged(r.hash, why)
					continue
				}
				fill(r, data)
			}
		}
		if err := rows.Close(); err != nil {
			return 0, err
		}
		if err := rows.Err(); err != nil {
			return 0, err
		}
		if !slices.ContainsFunc(regions, func(r region) bool { return r.hash != nil && !r.done && r.err == nil }) {
			break
		}
		parent, err := src.parentVault(ctx)
		if err != nil {
			return 0, err
		}
		if parent == nil {
			break // what is still missing is reported below
		}
		src, srcQ = parent, parent.r
	}
	// Holes, a single chunk, and chunks found nowhere (chunkData says so),
	// in order: a damaged chunk ends the read after what precedes it.
	n := 0
	for i := range regions {
		r := &regions[i]
		if r.err != nil {
			return n, withFile(r.err, "", "offset", r.off)
		}
		if !r.done {
			var data []byte
			if r.hash != nil {
				d, err := v.chunkData(ctx, q, r.hash)
				if err != nil {
					return n, withFile(err, "", "offset", r.off)
				}
				data = d
			}
			fill(r, data)
		}
		n += len(r.dst)
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
