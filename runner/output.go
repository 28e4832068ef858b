package runner

import (
	"bytes"
	"io"
	"os"
	"reflect"
	"sync/atomic"
	"time"
)

// Output is one captured stream of a command.
type Output struct {
	// Head and Tail are the first and last MaxOutput/2 bytes the command
	// wrote. When nothing was dropped, Head holds everything and Tail is
	// empty.
	Head, Tail []byte
	// Total is the number of bytes the command wrote to the stream.
	Total int64
	// Truncated reports that bytes between Head and Tail were dropped.
	Truncated bool
	// LiveDropped is the number of bytes that did not reach the live copy
	// (ProcSpec.Stdout or Stderr) because it failed, fell behind or was
	// still busy when Run returned. Always 0 without a live copy.
	LiveDropped int64
}

// Bytes returns Head followed by Tail, with nothing between them: when
// Truncated is set, callers mark the cut themselves.
func (o Output) Bytes() []byte {
	b := make([]byte, 0, len(o.Head)+len(o.Tail))
	return append(append(b, o.Head...), o.Tail...)
}

// capture keeps the head and the tail of a stream in at most max bytes.
type capture struct {
	headCap int
	head    []byte
	tail    []byte // ring of tailCap bytes, allocated on first use
	tailCap int
	tpos    int // next write position in tail
	tlen    int // bytes held in tail
	total   int64
}

func newCapture(max int64) *capture {
	h := int(max / 2)
	return &capture{headCap: h, tailCap: int(max) - h, head: make([]byte, 0, min(h, 64<<10))}
}

func (c *capture) Write(p []byte) {
	c.total += int64(len(p))
	if n := min(c.headCap-len(c.head), len(p)); n > 0 {
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 || c.tailCap == 0 {
		return
	}
	if c.tail == nil {
		c.tail = make([]byte, c.tailCap)
	}
	if len(p) >= c.tailCap {
		copy(c.tail, p[len(p)-c.tailCap:])
		c.tpos, c.tlen = 0, c.tailCap
		return
	}
	n := copy(c.tail[c.tpos:], p)
	copy(c.tail, p[n:])
	c.tpos = (c.tpos + len(p)) % c.tailCap
	c.tlen = min(c.tlen+len(p), c.tailCap)
}

// output returns the capture as an Output (LiveDropped is set by the caller).
func (c *capture) output() Output {
	var tail []byte
	if c.tlen < c.tailCap {
		tail = c.tail[:c.tlen]
	} else {
		tail = append(append(make([]byte, 0, c.tailCap), c.tail[c.tpos:]...), c.tail[:c.tpos]...)
	}
	if c.total <= int64(c.headCap+c.tailCap) {
		return Output{Head: append(c.head, tail...), Total: c.total}
	}
	return Output{Head: c.head, Tail: bytes.Clone(tail), Total: c.total, Truncated: true}
}

// drain copies one pipe into a capture and a live copy until EOF.
type drain struct {
	r    *os.File
	cap  *capture
	live *liveStream
	done chan struct{}
}

func startDrain(r *os.File, max int64, live *liveStream) *drain {
	d := &drain{r: r, cap: newCapture(max), live: live, done: make(chan struct{})}
	go d.run()
	return d
}

func (d *drain) run() {
	defer close(d.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := d.r.Read(buf)
		if n > 0 {
			d.cap.Write(buf[:n])
			d.live.offer(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// tee writes chunks to a live writer from its own goroutine, so a slow or
// failing writer never blocks a drain: chunks that do not fit in the queue,
// or arrive after the writer failed, are dropped and counted.
type tee struct {
	w      io.Writer
	ch     chan chunk
	done   chan struct{}
	failed atomic.Bool
}

// liveStream is one stream's view of a tee (two streams may share one).
type liveStream struct {
	t       *tee
	dropped atomic.Int64
}

type chunk struct {
	b []byte
	s *liveStream
}

// teeQueue chunks of at most 64 KiB are queued per live writer.
const teeQueue = 64

func newTee(w io.Writer) *tee {
	t := &tee{w: w, ch: make(chan chunk, teeQueue), done: make(chan struct{})}
	go t.run()
	return t
}

func (t *tee) run() {
	defer close(t.done)
	for c := range t.ch {
		if t.failed.Load() {
			c.s.dropped.Add(int64(len(c.b)))
			continue
		}
		if n, err := t.w.Write(c.b); err != nil {
			t.failed.Store(true)
			c.s.dropped.Add(int64(len(c.b) - max(n, 0)))
		}
	}
}

// close stops the tee after it has written what is queued, waiting at most
// wait for a busy writer; what is still queued after that is dropped.
func (t *tee) close(wait time.Duration) {
	close(t.ch)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-t.done:
	case <-timer.C:
		t.failed.Store(true)
		for c := range t.ch {
			c.s.dropped.Add(int64(len(c.b)))
		}
	}
}

func (s *liveStream) offer(p []byte) {
	if s == nil {
		return
	}
	if s.t.failed.Load() {
		s.dropped.Add(int64(len(p)))
		return
	}
	select {
	case s.t.ch <- chunk{b: bytes.Clone(p), s: s}:
	default:
		s.dropped.Add(int64(len(p)))
	}
}

func (s *liveStream) droppedBytes() int64 {
	if s == nil {
		return 0
	}
	return s.dropped.Load()
}

// liveStreams returns the live views for stdout and stderr and the tees to
// close. The same writer given for both streams gets one tee, so it is never
// written from two goroutines at once.
func liveStreams(stdout, stderr io.Writer) (o, e *liveStream, tees []*tee) {
	if stdout != nil {
		t := newTee(stdout)
		tees = append(tees, t)
		o = &liveStream{t: t}
	}
	if stderr != nil {
		if o != nil && sameWriter(stdout, stderr) {
			e = &liveStream{t: o.t}
		} else {
			t := newTee(stderr)
			tees = append(tees, t)
			e = &liveStream{t: t}
		}
	}
	return o, e, tees
}

func sameWriter(a, b io.Writer) bool {
	return reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.TypeOf(a).Comparable() && a == b
}
