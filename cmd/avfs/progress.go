package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"avfs/vault"
)

// progressEvery is how often a progress line is drawn at most (10 Hz); the
// first is drawn once the work has run that long, so quick work draws none.
const progressEvery = 100 * time.Millisecond

// progressLine shows how far a long operation has got on one line of a
// terminal, redrawn in place (a carriage return, the line, blanks over
// what is left of the last one): the items and bytes done, of their
// totals when known, the rate and, with a total, the time left at the
// rate so far.
//
//	import: 1200/10000 files, 12.0 MiB/100.0 MiB, 4.0 MiB/s, 22s left
//
// It clears the line when the work is done (done equals a known total) and
// at finish, so what is printed next starts on a clean line. A nil
// *progressLine does nothing: the commands use one whatever the output.
// It is safe for concurrent use.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	what  string // the operation: "import"
	unit  string // what its items are: "files", "chunks", "steps"
	cols  int    // the terminal's width (0: not known); longer lines are cut to fit
	now   func() time.Time
	start time.Time // the first report
	last  time.Time // the last line drawn
	drawn int       // the width of the line on the terminal (0: none)
}

// progress is the progress line of operation what, whose items are unit,
// on stderr; nil (no progress shown) unless stderr is a terminal and the
// output is not --json.
func (e *env) progress(what, unit string) *progressLine {
	f, ok := e.stderr.(*os.File)
	if !ok || e.json || !isTerminal(f) {
		return nil
	}
	p := newProgressLine(f, what, unit, time.Now)
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 1 {
		p.cols = int(ws.Col) - 1 // the last column wraps on some terminals
	}
	return p
}

func newProgressLine(w io.Writer, what, unit string, now func() time.Time) *progressLine {
	return &progressLine{w: w, what: what, unit: unit, now: now}
}

// report is the vault.ProgressFunc that draws p (nil for a nil p: the
// operation counts nothing).
func (p *progressLine) report() vault.ProgressFunc {
	if p == nil {
		return nil
	}
	return p.update
}

// update takes a report of the operation and draws it, at most every
// progressEvery; a report that the work is done clears the line.
func (p *progressLine) update(done, total vault.Work) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.now()
	if p.start.IsZero() {
		p.start = t
	}
	if total != (vault.Work{}) && done == total {
		p.clear()
		return
	}
	if t.Sub(p.start) < progressEvery || t.Sub(p.last) < progressEvery {
		return
	}
	p.last = t
	line := p.render(done, total, t.Sub(p.start))
	if p.cols > 0 && utf8.RuneCountInString(line) > p.cols {
		line = string([]rune(line)[:p.cols])
	}
	n := utf8.RuneCountInString(line)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(p.drawn-n, 0)))
	p.drawn = n
}

// render is the line for done of total, elapsed into the work.
func (p *progressLine) render(done, total vault.Work, elapsed time.Duration) string {
	var b strings.Builder
	b.WriteString(p.what + ": ")
	if total.Items > 0 {
		fmt.Fprintf(&b, "%d/%d %s", done.Items, total.Items, p.unit)
	} else {
		fmt.Fprintf(&b, "%d %s", done.Items, p.unit)
	}
	if done.Bytes > 0 || total.Bytes > 0 {
		b.WriteString(", " + humanSize(done.Bytes))
		if total.Bytes > 0 {
			b.WriteString("/" + humanSize(total.Bytes))
		}
	}
	secs := elapsed.Seconds()
	if secs <= 0 {
		return b.String()
	}
	// The rate goes by bytes when there are any, else items.
	if done.Bytes > 0 || total.Bytes > 0 {
		fmt.Fprintf(&b, ", %s/s", humanSize(int64(float64(done.Bytes)/secs)))
	} else {
		fmt.Fprintf(&b, ", %.0f %s/s", float64(done.Items)/secs, p.unit)
	}
	// The time left is the longer of what the items and the bytes left
	// take at their rates so far: many small files go by the count, one
	// large one by its bytes.
	left := time.Duration(-1)
	for _, m := range [][2]int64{{done.Items, total.Items}, {done.Bytes, total.Bytes}} {
		if m[0] > 0 && m[1] > 0 {
			left = max(left, time.Duration(float64(m[1]-m[0])/(float64(m[0])/secs)*float64(time.Second)))
		}
	}
	if left >= 0 {
		fmt.Fprintf(&b, ", %s left", left.Round(time.Second))
	}
	return b.String()
}

// clear blanks the line drawn, if any.
func (p *progressLine) clear() {
	if p.drawn > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.drawn))
		p.drawn = 0
	}
}

// finish clears the line: call it before printing anything else, and when
// the operation failed (a failure stops the reports short of the total).
func (p *progressLine) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}
