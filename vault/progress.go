package vault

import "context"

// Work is an amount of a long operation's work: Items (files, entries,
// chunks or steps: each operation's Progress option says which) and Bytes.
type Work struct {
	Items int64
	Bytes int64
}

// ProgressFunc is told how far a long operation has got: what is done so
// far and the total, a zero field of which is not known. The operation
// calls it on its own goroutine as it goes, as often as once an item (the
// consumer throttles what it shows), with done never decreasing, and once
// more with done as the total when it succeeds; a failed operation stops
// calling it. It must return quickly and must not use the vault. A nil
// ProgressFunc costs the operation nothing: it skips the counting it
// would do for one.
type ProgressFunc func(done, total Work)

// report calls f, when there is one.
func (f ProgressFunc) report(done, total Work) {
	if f != nil {
		f(done, total)
	}
}

// tally counts the entries of a tree walk for a ProgressFunc: each entry an
// item, a regular file's size its bytes (once for a file with several
// names).
type tally struct {
	Work
	links map[uint64]bool // inodes of files with several names counted
}

// add counts e.
func (t *tally) add(e Entry) {
	t.Items++
	if e.Kind != KindFile {
		return
	}
	if e.Nlink > 1 {
		if t.links == nil {
			t.links = map[uint64]bool{}
		}
		if t.links[e.Ino] {
			return
		}
		t.links[e.Ino] = true
	}
	t.Bytes += e.Size
}

// reporting wraps fn, a tree walk's function, to report to f after each
// entry fn handled: done against total (raised to done should the tree
// have grown). A nil f returns fn as it is.
func reporting(f ProgressFunc, total Work, done *tally, fn func(Entry) error) func(Entry) error {
	if f == nil {
		return fn
	}
	return func(e Entry) error {
		if err := fn(e); err != nil {
			return err
		}
		done.add(e)
		f(done.Work, Work{Items: max(total.Items, done.Items), Bytes: max(total.Bytes, done.Bytes)})
		return nil
	}
}

// treeWork counts the entries of the tree at e, and their bytes, as tally
// does: a walk of the tree's metadata, no content read.
func treeWork(ctx context.Context, q querier, e Entry) (Work, error) {
	var t tally
	err := walkTree(ctx, q, e, func(e Entry) error { t.add(e); return nil })
	return t.Work, err
}
