// Package linediff compares two texts line by line and writes the result
// in the unified format of diff -u and git diff.
//
// The comparison is Myers' O(ND) algorithm in its linear-space form (the
// one GNU diff uses): it finds a shortest edit script, so the number of
// lines deleted and inserted is the smallest there is, in O((N+M)·D) time
// and O(N+M) memory, where N and M are the line counts and D the size of
// the script. Like GNU diff it bounds the cost when the texts are large
// and very different: once a search has gone about √(N+M) edits deep (at
// least 256, git's floor; GNU diff's is 4096) it settles for the furthest
// point reached, so the script may then be longer than the shortest, never
// wrong, and the time stays near O((N+M)^1.5). Lines found in one text
// only are changes whatever the script and are set aside first, so a text
// edited throughout costs what its lines in common cost. Of equal scripts
// it picks GNU diff's: each run of changes slid where diff -u has it (see
// shift).
// Lines are compared whole, the newline included, so a last line without
// a newline differs from the same line with one.
//
// It never reads files: the caller brings the texts, and their size is the
// caller's to bound.
package linediff

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Op is what an edit does with one line.
type Op byte

// The ops, as the unified format prints them.
const (
	Equal  Op = ' ' // the line is in both texts
	Delete Op = '-' // the line is only in the old text
	Insert Op = '+' // the line is only in the new text
)

// Line is one line of a hunk.
type Line struct {
	Op   Op
	Text string // the line with its newline, when it has one (only a text's last line can lack it)
}

// Hunk is a run of changes with the unchanged lines around them.
type Hunk struct {
	// OldStart and NewStart are the numbers (from 1) of the hunk's first
	// line in each text; OldLines and NewLines count the hunk's lines of
	// each. A side with no lines has its start at the line before the
	// hunk (0 at the top), as the @@ header prints it.
	OldStart, OldLines int
	NewStart, NewLines int
	Lines              []Line
}

// Split cuts text into lines, each with its newline; the last lacks one
// when text does not end with a newline. The lines share text's memory.
func Split(text string) []string {
	if text == "" {
		return nil
	}
	lines := make([]string, 0, strings.Count(text, "\n")+1)
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n') + 1
		if i == 0 {
			i = len(text)
		}
		lines, text = append(lines, text[:i]), text[i:]
	}
	return lines
}

// Diff compares the lines of a and b and returns the hunks of the unified
// format with context unchanged lines around each change (a negative
// context is 0). Changes whose context would touch or overlap are one
// hunk: those at most 2·context lines apart. Identical texts have no hunks.
func Diff(a, b []string, context int) []Hunk {
	ca, cb := Compare(a, b)
	return hunks(a, b, ca, cb, max(context, 0))
}

// Compare marks the lines that differ: ca[i] when a[i] is deleted, cb[j]
// when b[j] is inserted; every other line of a matches one of b, in order.
// The marks are a shortest edit script unless the texts are large and very
// different (see the package comment).
func Compare(a, b []string) (ca, cb []bool) {
	ids := make(map[string]int32, len(a)+len(b))
	intern := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	ia, ib := intern(a), intern(b)
	// A line found nowhere in the other text is a change whatever the
	// script: compare the others only (as GNU diff's discard_confusing_lines
	// does, its first part). A text edited throughout then costs what its
	// lines in common cost, not the square of its edits.
	inA, inB := make([]bool, len(ids)), make([]bool, len(ids))
	for _, id := range ia {
		inA[id] = true
	}
	for _, id := range ib {
		inB[id] = true
	}
	ka, ma := kept(ia, inB)
	kb, mb := kept(ib, inA)
	d := &differ{a: ka, b: kb, ca: make([]bool, len(ka)), cb: make([]bool, len(kb))}
	n := len(ka) + len(kb) + 3
	d.fd, d.bd, d.off = make([]int, n), make([]int, n), len(kb)+1
	d.tooExpensive = 1
	for diags := n; diags != 0; diags >>= 2 {
		d.tooExpensive <<= 1
	}
	d.tooExpensive = max(d.tooExpensive, 256)
	d.compare(0, len(ka), 0, len(kb))
	ca, cb = marks(len(a), ma, d.ca), marks(len(b), mb, d.cb)
	shift(ia, ca, cb)
	shift(ib, cb, ca)
	return ca, cb
}

// kept returns the ids of the lines whose id is in other, and their
// indexes in ids.
func kept(ids []int32, other []bool) ([]int32, []int) {
	out, at := make([]int32, 0, len(ids)), make([]int, 0, len(ids))
	for i, id := range ids {
		if other[id] {
			out, at = append(out, id), append(at, i)
		}
	}
	return out, at
}

// marks is the change marks of a text of n lines: every line but those at
// (the lines compared), which take the marks of the comparison, changed.
func marks(n int, at []int, changed []bool) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	for k, i := range at {
		out[i] = changed[k]
	}
	return out
}

// shift slides each run of changed lines of one text (changed, its lines
// as ids) where the same script can have it, as GNU diff does: back to
// merge with the run before, forward to merge with the run after or as
// far as it goes, then back to where it lines up with a run of changes of
// the other text (other) when it can. The lines deleted and inserted stay
// as many, and the hunks are diff -u's: a line deleted from a run of
// equal lines is the last of them, say. This is GNU's shift_boundaries.
func shift(ids []int32, changed, other []bool) {
	n := len(changed)
	at := func(c []bool, k int) bool { return k >= 0 && k < len(c) && c[k] } // false past either end, as GNU's sentinels
	i, j := 0, 0
	for {
		// The next run of changes, and the matching point in the other text.
		for i < n && !changed[i] {
			for at(other, j) {
				j++
			}
			j++
			i++
		}
		if i == n {
			return
		}
		start := i
		for i++; at(changed, i); i++ {
		}
		for at(other, j) {
			j++
		}
		var corresponding int
		for {
			runlength := i - start
			// Back, while the line before the run is its last line: this
			// merges with a run before.
			for start > 0 && ids[start-1] == ids[i-1] {
				start--
				changed[start] = true
				i--
				changed[i] = false
				for at(changed, start-1) {
					start--
				}
				for j--; at(other, j); j-- {
				}
			}
			// Where the run's end lines up with changes in the other text
			// (n: nowhere yet).
			corresponding = n
			if at(other, j-1) {
				corresponding = i
			}
			// Forward, while the run's first line is the line after it:
			// this merges with a run after, else goes as far as it can.
			for i != n && ids[start] == ids[i] {
				changed[start] = false
				start++
				changed[i] = true
				i++
				for at(changed, i) {
					i++
				}
				for j++; at(other, j); j++ {
					corresponding = i
				}
			}
			if runlength == i-start {
				break
			}
		}
		// Back to the changes of the other text it lines up with.
		for corresponding < i {
			start--
			changed[start] = true
			i--
			changed[i] = false
			for j--; at(other, j); j-- {
			}
		}
	}
}

// differ is one comparison: the texts as line ids and the marks found.
type differ struct {
	a, b         []int32
	ca, cb       []bool
	fd, bd       []int // furthest x reached on each diagonal k = x-y (at k+off), forward and backward
	off          int
	tooExpensive int // the edit count at which a search settles for less than the shortest script
}

// compare marks the changes between a[xoff:xlim] and b[yoff:ylim].
func (d *differ) compare(xoff, xlim, yoff, ylim int) {
	for {
		for xoff < xlim && yoff < ylim && d.a[xoff] == d.b[yoff] {
			xoff, yoff = xoff+1, yoff+1
		}
		for xlim > xoff && ylim > yoff && d.a[xlim-1] == d.b[ylim-1] {
			xlim, ylim = xlim-1, ylim-1
		}
		switch {
		case xoff == xlim:
			for y := yoff; y < ylim; y++ {
				d.cb[y] = true
			}
			return
		case yoff == ylim:
			for x := xoff; x < xlim; x++ {
				d.ca[x] = true
			}
			return
		}
		xmid, ymid := d.split(xoff, xlim, yoff, ylim)
		// Recurse into the smaller half, loop on the larger: the stack
		// stays shallow whatever the split.
		if (xmid-xoff)+(ymid-yoff) < (xlim-xmid)+(ylim-ymid) {
			d.compare(xoff, xmid, yoff, ymid)
			xoff, yoff = xmid, ymid
		} else {
			d.compare(xmid, xlim, ymid, ylim)
			xlim, ylim = xmid, ymid
		}
	}
}

// split finds a point (xmid, ymid) on a shortest path from (xoff, yoff)
// to (xlim, ylim): the middle snake of searches from both ends, or, past
// tooExpensive edits, the furthest point either search reached. The first
// and last lines of both ranges differ (compare trimmed the rest), so
// the point is strictly between the corners.
func (d *differ) split(xoff, xlim, yoff, ylim int) (int, int) {
	fd, bd, o := d.fd, d.bd, d.off
	dmin, dmax := xoff-ylim, xlim-yoff // the diagonals of the range
	fmid, bmid := xoff-yoff, xlim-ylim // where each search starts
	fmin, fmax, bmin, bmax := fmid, fmid, bmid, bmid
	odd := (fmid-bmid)&1 != 0
	fd[o+fmid], bd[o+bmid] = xoff, xlim
	for c := 1; ; c++ {
		// One more edit forward on each diagonal in reach.
		if fmin > dmin {
			fmin--
			fd[o+fmin-1] = -1
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			fd[o+fmax+1] = -1
		} else {
			fmax--
		}
		for k := fmax; k >= fmin; k -= 2 {
			x, lo, hi := 0, fd[o+k-1], fd[o+k+1]
			if lo >= hi {
				x = lo + 1
			} else {
				x = hi
			}
			y := x - k
			for x < xlim && y < ylim && d.a[x] == d.b[y] {
				x, y = x+1, y+1
			}
			fd[o+k] = x
			if odd && bmin <= k && k <= bmax && bd[o+k] <= x {
				return x, y
			}
		}
		// And backward.
		if bmin > dmin {
			bmin--
			bd[o+bmin-1] = int(^uint(0) >> 1)
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			bd[o+bmax+1] = int(^uint(0) >> 1)
		} else {
			bmax--
		}
		for k := bmax; k >= bmin; k -= 2 {
			x, lo, hi := 0, bd[o+k-1], bd[o+k+1]
			if lo < hi {
				x = lo
			} else {
				x = hi - 1
			}
			y := x - k
			for x > xoff && y > yoff && d.a[x-1] == d.b[y-1] {
				x, y = x-1, y-1
			}
			bd[o+k] = x
			if !odd && fmin <= k && k <= fmax && x <= fd[o+k] {
				return x, y
			}
		}
		if c < d.tooExpensive {
			continue
		}
		// Too costly to find the best: take the diagonal that got
		// furthest, forward or backward.
		fbest, fx := -1, 0
		for k := fmax; k >= fmin; k -= 2 {
			x := min(fd[o+k], xlim)
			y := x - k
			if y > ylim {
				x, y = ylim+k, ylim
			}
			if x+y > fbest {
				fbest, fx = x+y, x
			}
		}
		bbest, bx := int(^uint(0)>>1), 0
		for k := bmax; k >= bmin; k -= 2 {
			x := max(xoff, bd[o+k])
			y := x - k
			if y < yoff {
				x, y = yoff+k, yoff
			}
			if x+y < bbest {
				bbest, bx = x+y, x
			}
		}
		if (xlim+ylim)-bbest < fbest-(xoff+yoff) {
			return fx, fbest - fx
		}
		return bx, bbest - bx
	}
}

// hunks groups the marked lines into hunks with context lines around.
func hunks(a, b []string, ca, cb []bool, context int) []Hunk {
	type edit struct {
		op   Op
		x, y int // the line's index in a (Delete, Equal) and b (Insert, Equal); else the next line's
	}
	script := make([]edit, 0, max(len(a), len(b)))
	changes := 0
	for x, y := 0, 0; x < len(a) || y < len(b); {
		switch {
		case x < len(a) && ca[x]:
			script = append(script, edit{Delete, x, y})
			x++
			changes++
		case y < len(b) && cb[y]:
			script = append(script, edit{Insert, x, y})
			y++
			changes++
		default:
			script = append(script, edit{Equal, x, y})
			x, y = x+1, y+1
		}
	}
	if changes == 0 {
		return nil
	}
	var out []Hunk
	for i := 0; i < len(script); {
		if script[i].op == Equal {
			i++
			continue
		}
		// A hunk: from context lines before this change to context lines
		// after the last change that is at most 2·context lines further.
		start := max(i-context, 0)
		end := i
		for j := i; j < len(script); {
			if script[j].op != Equal {
				end = j + 1
				j++
				continue
			}
			k := j
			for k < len(script) && script[k].op == Equal {
				k++
			}
			if k == len(script) || k-j > 2*context {
				break
			}
			j = k
		}
		stop := min(end+context, len(script))
		h := Hunk{OldStart: script[start].x, NewStart: script[start].y}
		h.Lines = make([]Line, 0, stop-start)
		for _, e := range script[start:stop] {
			switch e.op {
			case Equal:
				h.Lines = append(h.Lines, Line{Equal, a[e.x]})
				h.OldLines++
				h.NewLines++
			case Delete:
				h.Lines = append(h.Lines, Line{Delete, a[e.x]})
				h.OldLines++
			case Insert:
				h.Lines = append(h.Lines, Line{Insert, b[e.y]})
				h.NewLines++
			}
		}
		if h.OldLines > 0 {
			h.OldStart++
		}
		if h.NewLines > 0 {
			h.NewStart++
		}
		out = append(out, h)
		i = stop
	}
	return out
}

// Count returns the lines the hunks delete and insert.
func Count(hs []Hunk) (deleted, inserted int) {
	for _, h := range hs {
		for _, l := range h.Lines {
			switch l.Op {
			case Delete:
				deleted++
			case Insert:
				inserted++
			}
		}
	}
	return deleted, inserted
}

// NoNewline is the line the unified format prints after a line that has
// no newline at its end.
const NoNewline = `\ No newline at end of file`

// Header is the @@ line of h, without its newline.
func (h Hunk) Header() string {
	return "@@ -" + span(h.OldStart, h.OldLines) + " +" + span(h.NewStart, h.NewLines) + " @@"
}

// span is one side's range in an @@ header: START,COUNT, or START when the
// count is 1.
func span(start, n int) string {
	if n == 1 {
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(n)
}

// WriteHunks writes the hunks as the unified format does, after the ---
// and +++ lines: each @@ header, then its lines with their op as prefix,
// and NoNewline after a line without a newline. It returns the first
// error of w.
func WriteHunks(w io.Writer, hs []Hunk) error {
	var buf bytes.Buffer
	for _, h := range hs {
		buf.WriteString(h.Header())
		buf.WriteByte('\n')
		for _, l := range h.Lines {
			buf.WriteByte(byte(l.Op))
			buf.WriteString(l.Text)
			if !strings.HasSuffix(l.Text, "\n") {
				buf.WriteString("\n" + NoNewline + "\n")
			}
			if buf.Len() >= 32<<10 {
				if _, err := w.Write(buf.Bytes()); err != nil {
					return err
				}
				buf.Reset()
			}
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Unified writes the unified diff of a and b: the --- and +++ lines naming
// them as oldName and newName, then the hunks (see Diff and WriteHunks).
// Identical texts write nothing.
func Unified(w io.Writer, oldName, newName string, a, b []string, context int) error {
	hs := Diff(a, b, context)
	if len(hs) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "--- %s\n+++ %s\n", oldName, newName); err != nil {
		return err
	}
	return WriteHunks(w, hs)
}
