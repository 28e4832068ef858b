package vault

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"
)

// ReadAt fetches the chunks of a read together: windows that cross chunk
// boundaries, repeated chunks, holes, a short last chunk, and chunks a
// fork borrows from its parent beside its own.
func TestReadAtAcrossChunks(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	rng := rand.New(rand.NewPCG(1, 2))
	chunk := func() []byte {
		b := make([]byte, ChunkSize)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	a, b := chunk(), chunk()
	want := bytes.Join([][]byte{a, b, make([]byte, ChunkSize), b, chunk(), a[:100]}, nil) // chunk 2 is a hole
	write(t, v, "/f", string(want))
	v.Close()
	fork, err := s.Fork(ctx, "t", "child")
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	e, err := fork.Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	own := chunk() // chunk 4 of the fork is its own, the others its parent's
	if _, err := fork.WriteAt(ctx, e.Ino, own, 4*ChunkSize); err != nil {
		t.Fatal(err)
	}
	copy(want[4*ChunkSize:], own)
	for _, w := range []struct{ off, n int64 }{
		{0, int64(len(want))}, {0, 1 << 20}, {100, 3 * ChunkSize}, {ChunkSize - 1, 2}, {2 * ChunkSize, ChunkSize},
		{3*ChunkSize + 7, 2*ChunkSize + 50}, {int64(len(want)) - 10, 100}, {5 * ChunkSize, 100},
	} {
		p := make([]byte, w.n)
		for i := range p {
			p[i] = 0xff // holes must come back zeroed
		}
		n, err := fork.ReadAt(ctx, e.Ino, p, w.off)
		end := min(w.off+w.n, int64(len(want)))
		if n != int(end-w.off) || (err != nil && err != io.EOF) || !bytes.Equal(p[:n], want[w.off:end]) {
			t.Errorf("read %d bytes at %d: n %d, err %v, equal %v", w.n, w.off, n, err, bytes.Equal(p[:n], want[w.off:end]))
		}
	}
	// A read longer than a batch of chunks.
	long := bytes.Repeat(want, 5)
	write(t, fork, "/long", string(long))
	le, _ := fork.Stat(ctx, "/long")
	p := make([]byte, len(long)+10)
	if n, err := fork.ReadAt(ctx, le.Ino, p, 0); n != len(long) || err != io.EOF || !bytes.Equal(p[:n], long) {
		t.Errorf("long read: n %d, err %v", n, err)
	}
	if n, err := fork.ReadAt(ctx, le.Ino, p[:20*ChunkSize], 3*ChunkSize+5); n != 20*ChunkSize || err != nil || !bytes.Equal(p[:n], long[3*ChunkSize+5:][:n]) {
		t.Errorf("long read at an offset: n %d, err %v", n, err)
	}
	mustCheck(t, fork)

	// A fork of the fork: chunks from three vaults in one read.
	fork.Close()
	grand, err := s.Fork(ctx, "child", "grandchild")
	if err != nil {
		t.Fatal(err)
	}
	defer grand.Close()
	mine := chunk()
	if _, err := grand.WriteAt(ctx, e.Ino, mine, 0); err != nil {
		t.Fatal(err)
	}
	copy(want, mine)
	p = make([]byte, len(want))
	if n, err := grand.ReadAt(ctx, e.Ino, p, 0); n != len(want) || (err != nil && err != io.EOF) || !bytes.Equal(p, want) {
		t.Errorf("grandchild: n %d, err %v, equal %v", n, err, bytes.Equal(p, want))
	}
}
