package vault

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"io"

	"avfs/wire"
)

// FileReader reads the content of one file, or of one version of a file, as
// it was when it was opened: it holds a read transaction (a snapshot of the
// vault) until Close, so that writes made meanwhile are neither seen nor
// able to tear what it returns. It is an io.Reader, io.ReaderAt, io.WriterTo
// and io.Closer.
//
// It fetches content a run of up to 16 chunks (1 MiB) at a time, with one
// query, into a buffer of its own; a Read smaller than that is served from
// the buffer, so a small read never costs a query of its own. Its memory is
// that buffer whatever the file's size: it never holds a whole file.
// WriteTo (which io.Copy uses) streams the content through the same buffer.
//
// Errors are typed (*wire.Error) and name the operation: integrity_failed
// when a chunk is missing (a damaged vault, a fork whose parent lost it) or
// damaged (its stored data is not what its hash names; details: chunk,
// path, offset, version), vault_busy, host_io, internal when ctx was
// cancelled. Every chunk is verified against its hash before any of its
// bytes is delivered: a FileReader never serves unverified bytes. A failed
// Read or WriteTo may have delivered a prefix of the content before it
// failed, never a byte of the chunk that failed; the bytes it delivered are
// always the file's, at their offsets.
//
// A FileReader is not safe for concurrent use. Close it before the vault:
// until then it holds a connection of the vault's read pool and keeps the
// vault's log from being folded into its file past its snapshot (a GC
// meanwhile waits for it, up to the busy timeout, before it compacts).
type FileReader struct {
	v    *Vault
	ctx  context.Context
	op   string    // names the reads in errors
	path string    // the file's path, for errors
	ver  int64     // the version read, 0 for the current content
	conn *sql.Conn // the transaction's connection; nil as tx is
	tx   *sql.Tx   // nil for literal content and once closed
	q    querier
	in   *inode // the content: size and chunk hashes; nil for literal content
	lit  []byte // literal content (a symlink version's target), when in is nil

	off    int64  // the next byte Read returns
	buf    []byte // content from bufOff on, fetched ahead of Read
	bufOff int64
	closed bool
}

// OpenFile opens the file at p (following symlinks) for reading. It fails
// with not_found, is_a_directory, and invalid_input for a special file
// (fifo, socket), before any content is read. The caller must Close it.
func (v *Vault) OpenFile(ctx context.Context, p string) (*FileReader, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	return v.openReader(ctx, "read "+p, p, 0, func(q querier) (*inode, []byte, error) {
		ino, err := v.resolve(ctx, q, p, true)
		if err != nil {
			return nil, nil, err
		}
		in, err := getInode(ctx, q, ino)
		if err != nil {
			return nil, nil, err
		}
		if in.kind == KindDir {
			return nil, nil, wire.Errorf(wire.CodeIsDir, "%s is a directory", p).With("path", p)
		}
		if in.kind.special() {
			return nil, nil, wire.Errorf(wire.CodeInvalidInput, "%s is a %s: it has no content to read", p, in.kind).With("path", p)
		}
		return in, nil, nil
	})
}

// OpenVersion opens version n of the file at path (see History) for
// reading; a symlink's version reads as its target. It fails with
// version_not_found when there is no version n or when version n records
// the file's deletion. The caller must Close it.
func (v *Vault) OpenVersion(ctx context.Context, path string, n int64) (*FileReader, error) {
	path, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	return v.openReader(ctx, "read version", path, n, func(q querier) (*inode, []byte, error) {
		ino, err := v.historyIno(ctx, q, path)
		if err != nil {
			return nil, nil, err
		}
		vs, err := versionsOf(ctx, q, ino)
		if err != nil {
			return nil, nil, err
		}
		ver, err := pickVersion(vs, n, path)
		if err != nil {
			return nil, nil, err
		}
		if ver.Op == "delete" {
			return nil, nil, wire.Errorf(wire.CodeVersionNotFound, "version %d of %s records its deletion; it has no content", n, path)
		}
		if ver.Kind == KindSymlink {
			return nil, []byte(ver.Target), nil
		}
		return &inode{kind: KindFile, size: ver.Size, chunks: ver.chunks}, nil, nil
	})
}

// openReader begins a read transaction and keeps it when pick finds content.
//
// The transaction has a connection of its own, which reads through a small
// page cache (2 MiB) instead of the memory map the vault's connections use:
// every page of a mapped file a process reads stays in its resident memory
// while the map lasts, so streaming a file through the map grew a process
// by the file's size, up to the map's 1 GiB; and a stream reads each page
// once, so the usual 16 MB cache would only fill up. The connection gets
// its map and cache back when the reader closes.
func (v *Vault) openReader(ctx context.Context, op, path string, ver int64, pick func(q querier) (*inode, []byte, error)) (*FileReader, error) {
	conn, tx, err := v.beginStream(ctx, op)
	if err != nil {
		return nil, err
	}
	q := cq{tx: tx, c: v.rs}
	in, lit, err := pick(q)
	if err != nil {
		tx.Rollback()
		releaseConn(conn)
		return nil, wrapOp(op, err)
	}
	r := &FileReader{v: v, ctx: ctx, op: op, path: path, ver: ver, conn: conn, tx: tx, q: q, in: in, lit: lit}
	if in == nil {
		r.release() // literal content: nothing more to read from the vault
	}
	return r, nil
}

// beginStream begins a read transaction on a connection of the read pool
// set for streaming content (no memory map, a 2 MiB page cache; see
// openReader). The caller ends it with tx.Rollback and releaseConn(conn).
func (v *Vault) beginStream(ctx context.Context, op string) (*sql.Conn, *sql.Tx, error) {
	conn, err := v.rdb.Conn(ctx)
	if err != nil {
		return nil, nil, storageErr(op, err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA mmap_size = 0; PRAGMA cache_size = -2048"); err != nil {
		discardConn(conn)
		return nil, nil, storageErr(op, err)
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		releaseConn(conn)
		return nil, nil, storageErr(op, err)
	}
	return conn, tx, nil
}

// releaseConn gives conn its memory map and page cache back and returns it to the pool,
// or closes it for good when that fails.
func releaseConn(conn *sql.Conn) {
	if _, err := conn.ExecContext(context.Background(), mmapPragma+"; PRAGMA cache_size = "+cacheSize); err != nil {
		discardConn(conn)
		return
	}
	_ = conn.Close()
}

// discardConn closes conn's SQLite connection instead of pooling it.
func discardConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// release ends the transaction and returns the connection.
func (r *FileReader) release() {
	if r.tx != nil {
		_ = r.tx.Rollback()
		r.tx = nil
	}
	if r.conn != nil {
		releaseConn(r.conn)
		r.conn = nil
	}
}

// Size is the length of the content in bytes.
func (r *FileReader) Size() int64 {
	if r.in == nil {
		return int64(len(r.lit))
	}
	return r.in.size
}

// SameContent reports whether r and o hold the same bytes as far as their
// content maps tell, without reading any: both the same literal (a
// symlink's target), or both the same size made of the same chunks. false
// proves nothing (equal bytes may be stored as different chunk maps: zeros
// written over a hole, a short chunk at the end); compare the bytes to
// know. It never fails and costs no query.
func (r *FileReader) SameContent(o *FileReader) bool {
	switch {
	case r.in == nil && o.in == nil:
		return string(r.lit) == string(o.lit)
	case r.in == nil || o.in == nil:
		return false
	}
	return r.in.size == o.in.size && bytes.Equal(r.in.chunks, o.in.chunks)
}

// batch is the most content one fetch asks for.
const batch = readBatch * ChunkSize

// ReadAt reads len(p) bytes at off, as io.ReaderAt says: fewer only with an
// error, io.EOF at the end. It does not move the offset of Read.
func (r *FileReader) ReadAt(p []byte, off int64) (int, error) {
	if r.closed {
		return 0, wire.Errorf(wire.CodeInternal, "%s: reader is closed", r.op)
	}
	if off < 0 {
		return 0, wire.Errorf(wire.CodeInvalidInput, "%s: negative offset", r.op)
	}
	if r.in == nil {
		if off >= int64(len(r.lit)) {
			return 0, io.EOF
		}
		n := copy(p, r.lit[off:])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := r.v.readAt(r.ctx, r.q, r.in, p, off)
	if err != nil && err != io.EOF {
		if cerr := r.ctx.Err(); cerr != nil {
			err = cerr // the transaction was ended by the cancellation
		}
		if r.ver != 0 {
			err = withFile(err, r.path, "version", r.ver)
		} else {
			err = withFile(err, r.path)
		}
		err = wrapOp(r.op, err)
	}
	return n, err
}

// Read reads the next bytes of the content; io.EOF at the end.
func (r *FileReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, wire.Errorf(wire.CodeInternal, "%s: reader is closed", r.op)
	}
	size := r.Size()
	if r.off >= size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.off >= r.bufOff && r.off < r.bufOff+int64(len(r.buf)) {
		n := copy(p, r.buf[r.off-r.bufOff:])
		r.off += int64(n)
		return n, nil
	}
	if len(p) >= batch {
		// A read as large as a fetch goes straight into p.
		n, err := r.ReadAt(p[:min(int64(len(p)), size-r.off)], r.off)
		r.off += int64(n)
		if err == io.EOF && n > 0 {
			err = nil
		}
		return n, err
	}
	if err := r.fill(); err != nil {
		return 0, err
	}
	n := copy(p, r.buf)
	r.off += int64(n)
	return n, nil
}

// fill fetches the content from r.off on into r.buf: one run of chunks.
func (r *FileReader) fill() error {
	size := r.Size()
	if r.buf == nil {
		r.buf = make([]byte, max(min(size, batch), 1))
	}
	r.buf = r.buf[:min(int64(cap(r.buf)), size-r.off)]
	n, err := r.ReadAt(r.buf, r.off)
	r.buf, r.bufOff = r.buf[:n], r.off
	if err == io.EOF && n == len(r.buf) {
		err = nil
	}
	return err
}

// WriteTo writes the rest of the content to w, a run of chunks at a time,
// and returns the number of bytes written. A failure of w is a host_io
// error; w may then have been given a prefix of the content.
func (r *FileReader) WriteTo(w io.Writer) (int64, error) {
	var written int64
	size := r.Size()
	for r.off < size {
		if !(r.off >= r.bufOff && r.off < r.bufOff+int64(len(r.buf))) {
			if r.closed {
				return written, wire.Errorf(wire.CodeInternal, "%s: reader is closed", r.op)
			}
			if err := r.fill(); err != nil {
				// What was read before the failure (verified, the file's) goes
				// out first; nothing of the chunk that failed.
				if len(r.buf) > 0 {
					n, werr := w.Write(r.buf)
					written += int64(n)
					r.off += int64(n)
					if werr != nil {
						return written, wire.Errorf(wire.CodeHostIO, "%s: write output: %w", r.op, werr)
					}
				}
				return written, err
			}
			if len(r.buf) == 0 {
				return written, wire.Errorf(wire.CodeInternal, "%s: no content at offset %d of %d", r.op, r.off, size)
			}
		}
		chunk := r.buf[r.off-r.bufOff:]
		n, err := w.Write(chunk)
		written += int64(n)
		r.off += int64(n)
		if err == nil && n < len(chunk) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return written, wire.Errorf(wire.CodeHostIO, "%s: write output: %w", r.op, err)
		}
	}
	return written, nil
}

// Close ends the read transaction. It never fails; a closed reader's reads
// fail with an internal error.
func (r *FileReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.release()
	r.buf = nil
	return nil
}
