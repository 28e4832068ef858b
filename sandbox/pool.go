package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// Prepared sandboxes
//
// Cost: most of a sandbox's set-up is the part of its view that is the
// same for every run of a vault — the namespaces, /etc's binds, /dev, the
// system directories, the home — about 70 mounts, several milliseconds a
// run. Fix: a long-lived avfs (avfs serve) keeps a Pool that builds that
// part ahead, while it is idle, in an init that then waits (init.c's
// "await"). A run whose view has the same part takes the prepared init
// and sends it only the rest: the workspace, as a detached clone of its
// mount (open_tree) that the init moves into the view, the working
// directory, Landlock, the environment and the command, with the
// command's streams. Invariant: a prepared sandbox shows exactly what a
// sandbox built for the run would — the part built ahead is found by the
// very records the run's own plan would start with, never by a summary of
// them — and serves one run only: every run still gets namespaces and a
// view of its own. What it cannot know ahead is how the host changes
// after it was built (a file of /etc replaced by a rename shows as it
// was), so it is used only while younger than MaxAge.

// Defaults of a Pool.
const (
	// DefaultPreparedAge is how long a prepared sandbox may wait for a
	// run before it is built again.
	DefaultPreparedAge = time.Minute
	// DefaultPreparedViews is how many different views a pool keeps one
	// prepared sandbox of.
	DefaultPreparedViews = 4
	// preparedKeep is how long a view nobody ran in keeps being prepared.
	preparedKeep = 10 * time.Minute
	// preparedWait is how long a run waits for the sandbox of its view
	// being prepared (it started when the last run ended, a few
	// milliseconds ago) before it builds one for itself: two sandboxes
	// built at once slow each other down.
	preparedWait = 250 * time.Millisecond
	// preparedIdle is how long no run must have been under way before a
	// sandbox is prepared: runs that follow each other at once would
	// each compete with the preparation for the next.
	preparedIdle = 50 * time.Millisecond
)

// Pool prepares sandboxes ahead of the runs that will take them: after a
// run with a view, the next sandbox of that view is built while nothing
// waits for it. New takes one when it fits, or builds the run's sandbox
// as New does. It is safe for concurrent use.
//
// It needs open_tree(2), which the kernel allows to holders of
// CAP_SYS_ADMIN over their mount namespace (root): elsewhere NewPool
// returns a pool that prepares nothing (Stats says why) and every sandbox
// is built for its run.
type Pool struct {
	exe, dir string
	maxAge   time.Duration
	wait     time.Duration // preparedWait
	idle     time.Duration // preparedIdle

	mu     sync.Mutex
	views  map[string]*preparedView
	closed bool
	busy   int       // runs under way (see Busy)
	quiet  time.Time // when the last run ended
	armed  bool      // a wake is due
	off    error     // why nothing is prepared
	stats  PoolStats
	wg     sync.WaitGroup // preparations and discards under way
	stop   chan struct{}  // ends the janitor
}

// preparedView is the sandbox a Pool keeps ready for one view.
type preparedView struct {
	spec      Spec     // the last run's, which the next one is prepared for
	ready     *Process // prepared and waiting; nil when none
	at        time.Time
	used      time.Time     // when a run last asked for this view
	preparing chan struct{} // closed when the preparation under way ends; nil when none is
	wanted    bool          // to be prepared once no run is under way
}

// PoolStats counts what a Pool did.
type PoolStats struct {
	Taken    int64  // runs that took a prepared sandbox
	Built    int64  // runs whose sandbox was built for them
	Prepared int64  // sandboxes prepared
	Failed   int64  // preparations that failed (their runs were built for them)
	Waiting  int    // prepared sandboxes waiting now
	Off      string // why the pool prepares nothing ("" when it does)
}

// NewPool returns a pool of sandboxes of the binary exe (which holds the
// init), whose prepared roots are made in dir (made 0700 if missing;
// leftovers of a killed avfs there are removed). A pool must be closed.
func NewPool(exe, dir string, maxAge time.Duration) *Pool {
	if maxAge <= 0 {
		maxAge = DefaultPreparedAge
	}
	p := &Pool{exe: exe, dir: dir, maxAge: maxAge, wait: preparedWait, idle: preparedIdle, views: map[string]*preparedView{}, stop: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		p.off = err
	} else if fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err != nil {
		p.off = fmt.Errorf("open_tree: %w", err)
	} else {
		unix.Close(fd)
		// A root left by a killed avfs is an empty directory (its mount
		// was in a namespace that died with its init); a live one is busy.
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
		go p.janitor()
	}
	if p.off != nil {
		p.stats.Off = p.off.Error()
	}
	return p
}

// New returns the sandbox of spec, as the package's New does: a prepared
// one when the pool has one of the same view, else one built for it; a
// run of this view then has the next one prepared once it is over.
func (p *Pool) New(spec Spec) (*Process, error) {
	key, err := spec.viewKey()
	if err != nil || p.off != nil {
		return New(p.exe, spec)
	}
	now := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return New(p.exe, spec)
	}
	v := p.views[key]
	if v == nil {
		p.evict()
		v = &preparedView{}
		p.views[key] = v
	}
	v.spec, v.used = spec, now
	if v.ready == nil && v.preparing != nil {
		under := v.preparing
		p.mu.Unlock()
		t := time.NewTimer(p.wait)
		select {
		case <-under:
		case <-t.C:
		}
		t.Stop()
		p.mu.Lock()
		now = time.Now()
	}
	taken := v.ready
	v.ready = nil
	if taken != nil && now.Sub(v.at) > p.maxAge {
		p.discard(taken)
		taken = nil
	}
	if taken != nil {
		p.stats.Taken++
	} else {
		p.stats.Built++
	}
	p.mu.Unlock()
	refill := func() { p.prepareLater(key) }
	if taken == nil {
		proc, err := New(p.exe, spec)
		if err == nil {
			proc.done = refill
		}
		return proc, err
	}
	taken.spec, taken.done = &spec, refill
	return taken, nil
}

// Stats returns what the pool did so far.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	for _, v := range p.views {
		if v.ready != nil {
			st.Waiting++
		}
	}
	return st
}

// Close ends the prepared sandboxes and waits for those being prepared;
// New then builds every sandbox for its run.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		if p.off == nil {
			close(p.stop)
		}
		for _, v := range p.views {
			if v.ready != nil {
				p.discard(v.ready)
				v.ready = nil
			}
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Busy marks a run under way until the function it returns is called.
// Sandboxes are prepared only once no run has been for preparedIdle:
// preparing one competes with a run for the CPUs and for the kernel's
// mount lock, which every mount of either takes.
func (p *Pool) Busy() (release func()) {
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.busy--; p.busy == 0 {
				p.quiet = time.Now()
				p.wakeLocked()
			}
		})
	}
}

// wakeLocked prepares the views wanted once avfs has been quiet for
// p.idle, or arranges to look again then. p.mu is held.
func (p *Pool) wakeLocked() {
	if p.busy > 0 || p.closed {
		return
	}
	if left := p.idle - time.Since(p.quiet); left > 0 {
		if p.armed {
			return
		}
		p.armed = true
		time.AfterFunc(left, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.armed = false
			p.wakeLocked()
		})
		return
	}
	for k, v := range p.views {
		if v.wanted {
			p.prepareLocked(k, v)
		}
	}
}

// prepareLater prepares the next sandbox of the view key in the
// background once no run is under way, unless one is ready or on its way.
func (p *Pool) prepareLater(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v := p.views[key]; v != nil {
		p.prepareLocked(key, v)
	}
}

// prepareLocked is prepareLater with p.mu held.
func (p *Pool) prepareLocked(key string, v *preparedView) {
	if p.closed || v.ready != nil || v.preparing != nil {
		return
	}
	if p.busy > 0 || time.Since(p.quiet) < p.idle {
		v.wanted = true
		p.wakeLocked()
		return
	}
	under := make(chan struct{})
	v.wanted, v.preparing = false, under
	spec := v.spec
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		proc, err := p.prepare(spec)
		p.mu.Lock()
		defer p.mu.Unlock()
		defer close(under)
		v.preparing = nil
		if err != nil {
			p.stats.Failed++
			return
		}
		p.stats.Prepared++
		if p.closed || p.views[key] != v || v.ready != nil {
			p.discard(proc)
			return
		}
		v.ready, v.at = proc, time.Now()
	}()
}

// prepare builds the part of spec's view that does not depend on the
// run, in an init that then waits for the rest.
func (p *Pool) prepare(spec Spec) (*Process, error) {
	root, err := os.MkdirTemp(p.dir, "view-")
	if err != nil {
		return nil, err
	}
	b := spec.prepared(root)
	if b.err != nil {
		os.Remove(root)
		return nil, b.err
	}
	proc, err := start(p.exe, b.buf.Bytes(), spec, true)
	if err != nil {
		os.Remove(root)
		return nil, err
	}
	proc.root, proc.exe = root, p.exe
	if err := proc.launch(); err != nil {
		os.Remove(root)
		return nil, err
	}
	if err := proc.expect("prepared"); err != nil {
		return nil, err
	}
	return proc, nil
}

// discard ends a prepared sandbox nobody will take, in the background.
// p.mu is held.
func (p *Pool) discard(proc *Process) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		proc.Close()
	}()
}

// evict makes room for one more view: the one asked for least recently
// goes. p.mu is held.
func (p *Pool) evict() {
	if len(p.views) < DefaultPreparedViews {
		return
	}
	var oldest string
	for k, v := range p.views {
		if oldest == "" || v.used.Before(p.views[oldest].used) {
			oldest = k
		}
	}
	if v := p.views[oldest]; v.ready != nil {
		p.discard(v.ready)
	}
	delete(p.views, oldest)
}

// janitor replaces prepared sandboxes older than maxAge (the host may
// have changed beneath them) while their view was asked for lately, and
// forgets the others.
func (p *Pool) janitor() {
	t := time.NewTicker(p.maxAge / 2)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			var again []string
			p.mu.Lock()
			for k, v := range p.views {
				if v.ready != nil && now.Sub(v.at) > p.maxAge {
					p.discard(v.ready)
					v.ready = nil
				}
				switch {
				case now.Sub(v.used) > preparedKeep:
					if v.ready != nil {
						p.discard(v.ready)
					}
					if v.preparing == nil {
						delete(p.views, k)
					}
				case v.ready == nil:
					again = append(again, k)
				}
			}
			p.mu.Unlock()
			for _, k := range again {
				p.prepareLater(k)
			}
		}
	}
}

// viewKey is what finds a prepared sandbox for spec: the records of the
// part of its view built ahead (with no root: each has its own), and its
// namespaces.
func (s *Spec) viewKey() (string, error) {
	b := s.prepared("")
	if b.err != nil {
		return "", b.err
	}
	net := s.Network != wire.NetworkHost
	return fmt.Sprintf("%d %d %t\x00%s", s.UID, s.GID, net, b.buf.Bytes()), nil
}

// resume sends a prepared sandbox the rest of its run: the records that
// follow the view built ahead (the workspace attached from a clone of its
// mount), and the command's streams; then waits, as Start does, for the
// view to be complete. A prepared init that is gone is replaced by a
// sandbox built for the run.
func (p *Process) resume() error {
	spec := p.spec
	p.spec = nil
	b := spec.rest()
	if b.err != nil {
		p.Close()
		return b.err
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, spec.Workspace, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		p.Close()
		return wire.Errorf(wire.CodeSandbox, "sandbox: bind source %s: %v", spec.Workspace, err).With("step", "attach")
	}
	defer unix.Close(tree)
	rest, err := memfd("avfs-sandbox-run", b.buf.Bytes())
	if err != nil {
		p.Close()
		return err
	}
	defer rest.Close()
	streams, err := p.streams()
	if err != nil {
		p.Close()
		return err
	}
	rights := unix.UnixRights(int(rest.Fd()), int(streams[0].Fd()), int(streams[1].Fd()), int(streams[2].Fd()), tree)
	done := p.done
	p.done = nil // a replacement calls it
	err = unix.Sendmsg(int(p.control.Fd()), []byte{0}, rights, nil, 0)
	for _, f := range streams {
		f.Close()
	}
	p.closeControl()
	gone := err != nil
	if !gone {
		if gone, err = p.expectOrGone("ready"); !gone {
			p.done = done
			return err
		}
	}
	// Gone while it waited (killed from outside), so the command did not
	// start: the run gets a sandbox built for it, with the same streams.
	p.Close()
	fresh, err := New(p.exe, *spec)
	if err != nil {
		if done != nil {
			done()
		}
		return err
	}
	fresh.Cmd.Stdin, fresh.Cmd.Stdout, fresh.Cmd.Stderr = p.Cmd.Stdin, p.Cmd.Stdout, p.Cmd.Stderr
	fresh.done = done
	*p = *fresh
	return p.Start()
}

// streams are the command's stdin, stdout and stderr as files, from Cmd's
// (as exec.Cmd makes them: nil is /dev/null; a reader or writer that is
// not a file is copied through a pipe, which Wait waits to drain). Each is
// ours to close once the init has it.
func (p *Process) streams() ([3]*os.File, error) {
	var out [3]*os.File
	fail := func(err error) ([3]*os.File, error) {
		for _, f := range out {
			if f != nil {
				f.Close()
			}
		}
		return out, wire.Errorf(wire.CodeSandbox, "sandbox: the command's streams: %v", err).With("step", "streams")
	}
	dup := func(f *os.File) (*os.File, error) {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), f.Name()), nil
	}
	var err error
	switch r := p.Cmd.Stdin.(type) {
	case nil:
		out[0], err = os.Open(os.DevNull)
	case *os.File:
		out[0], err = dup(r)
	default:
		var w *os.File
		if out[0], w, err = os.Pipe(); err == nil {
			go func() {
				_, _ = io.Copy(w, r)
				w.Close()
			}()
		}
	}
	if err != nil {
		return fail(err)
	}
	for i, wr := range []io.Writer{p.Cmd.Stdout, p.Cmd.Stderr} {
		switch w := wr.(type) {
		case nil:
			out[1+i], err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		case *os.File:
			out[1+i], err = dup(w)
		default:
			var r *os.File
			if r, out[1+i], err = os.Pipe(); err == nil {
				drained := make(chan struct{})
				p.copies = append(p.copies, drained)
				go func() {
					defer close(drained)
					_, _ = io.Copy(w, r)
					r.Close()
				}()
			}
		}
		if err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// memfd is a sealed-off copy of b in memory, read from its start.
func memfd(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, wire.Errorf(wire.CodeSandbox, "sandbox: memfd: %v", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, wire.Errorf(wire.CodeSandbox, "sandbox: write the plan: %v", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, wire.Errorf(wire.CodeSandbox, "sandbox: write the plan: %v", err)
	}
	return f, nil
}
