package vault

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"

	"avfs/wire"
)

// Change is one path that differs between two states of a vault.
type Change struct {
	Path       string         `json:"path"`               // vault-absolute
	PathB64    string         `json:"path_b64,omitempty"` // wire.B64 of Path
	Op         string         `json:"op"`                 // added, modified or deleted
	Kind       Kind           `json:"kind"`
	SizeBefore *int64         `json:"size_before"`
	SizeAfter  *int64         `json:"size_after"`
	ModeBefore *wire.FileMode `json:"mode_before"` // "0644" in JSON; null when added
	ModeAfter  *wire.FileMode `json:"mode_after"`  // null when deleted
}

// Diff lists what changed from checkpoint from to checkpoint to; an empty
// to means the current state. It costs what diffGens does: it grows with
// the rows changed between the two, not with the size of the vault.
func (v *Vault) Diff(ctx context.Context, from, to string) ([]Change, error) {
	var out []Change
	err := v.view(ctx, "diff checkpoints", func(q querier, st state) error {
		ga, gb, err := checkpointSpan(ctx, q, st, from, to)
		if err != nil {
			return err
		}
		out, err = diffGens(ctx, q, ga, gb)
		return err
	})
	return out, err
}

// checkpointSpan returns the generations of checkpoint from and of
// checkpoint to, read in q (st: its state); an empty to is the current
// state. It fails with checkpoint_not_found like findCheckpoint.
func checkpointSpan(ctx context.Context, q querier, st state, from, to string) (ga, gb int64, err error) {
	a, err := findCheckpoint(ctx, q, from)
	if err != nil {
		return 0, 0, err
	}
	gb = st.gen
	if to != "" {
		b, err := findCheckpoint(ctx, q, to)
		if err != nil {
			return 0, 0, err
		}
		gb = b.Generation
	}
	return a.Generation, gb, nil
}

// pathResolver finds the paths of inodes over one span of generations:
// a path that names the inode at every generation from lo to hi ("" when
// there is none; lo == hi asks for the path at that generation).
//
// Cost: each inode's path is its parent's path and its name, and every
// path found is kept, so resolving all the inodes of a tree costs one
// query per inode however deep it is, and none for the inodes primed
// (prime reads their entries and those of every directory above them in
// one query); walking to the root for each would cost the depth each, the
// square of it for a deep chain. Memory: the paths kept. There is no
// depth limit; a directory loop (which a vault never holds) is an error
// rather than a hang.
type pathResolver struct {
	ctx    context.Context
	q      querier
	lo, hi int64
	known  map[int64]string
	up     map[int64]upEntry // primed: the entry that of follows up from an inode
}

// upEntry is the entry that names an inode: its directory and name (ok
// false: none over the span).
type upEntry struct {
	parent int64
	name   string
	ok     bool
}

func newPathResolver(ctx context.Context, q querier, lo, hi int64) *pathResolver {
	return &pathResolver{ctx: ctx, q: q, lo: lo, hi: hi, known: map[int64]string{rootIno: "/"}}
}

// of returns the path of ino ("" when it has none over the span).
func (r *pathResolver) of(ino int64) (string, error) {
	if p, ok := r.known[ino]; ok {
		return p, nil
	}
	// Walk up to an inode whose path is known (the root at the latest),
	// then set the paths of the inodes walked from the top down.
	var chain []int64
	var names []string
	var seen map[int64]bool
	base, cur := "", ino
	for {
		if p, ok := r.known[cur]; ok {
			base = p
			break
		}
		if seen == nil {
			seen = map[int64]bool{}
		}
		if seen[cur] {
			return "", wire.Errorf(wire.CodeInternal, "directory loop at inode %d", cur)
		}
		seen[cur] = true
		var parent int64
		var name string
		var err error
		if e, ok := r.up[cur]; ok {
			parent, name = e.parent, e.name
			if !e.ok {
				err = sql.ErrNoRows
			}
		} else {
			err = r.q.QueryRowContext(r.ctx, "SELECT parent, name FROM dentries WHERE ino = ? AND gen_from <= ? AND gen_to > ? ORDER BY parent, name LIMIT 1", cur, r.lo, r.hi).Scan(&parent, &name)
		}
		if errors.Is(err, sql.ErrNoRows) {
			r.known[cur] = ""
			break // base "": no path for cur, nor for what is beneath it
		}
		if err != nil {
			return "", err
		}
		chain, names = append(chain, cur), append(names, name)
		cur = parent
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if base != "" {
			base = joinName(base, names[i])
		}
		r.known[chain[i]] = base
	}
	return r.known[ino], nil
}

// prime reads the entries that name the inodes in inos over the span, and
// those of the directories above them up to the root, in one recursive
// query, so that of makes no query for any of them. Of an inode's names
// it keeps the one of makes its path of: the first by (parent, name).
func (r *pathResolver) prime(inos []int64) error {
	var list []byte
	for _, ino := range inos {
		if _, ok := r.known[ino]; !ok {
			if _, ok := r.up[ino]; !ok {
				list = appendJSONInt(list, ino)
			}
		}
	}
	if list == nil {
		return nil
	}
	list = append(list, ']')
	if r.up == nil {
		r.up = map[int64]upEntry{}
	}
	rows, err := r.q.QueryContext(r.ctx, `WITH RECURSIVE up(ino) AS (
		SELECT value FROM json_each(?1)
		UNION SELECT d.parent FROM up JOIN dentries d ON d.ino = up.ino AND d.gen_from <= ?2 AND d.gen_to > ?3)
		SELECT up.ino, d.parent, d.name FROM up LEFT JOIN dentries d ON d.ino = up.ino AND d.gen_from <= ?2 AND d.gen_to > ?3`, string(list), r.lo, r.hi)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ino int64
		var parent sql.NullInt64
		var name sql.NullString
		if err := rows.Scan(&ino, &parent, &name); err != nil {
			return err
		}
		e := upEntry{parent: parent.Int64, name: name.String, ok: parent.Valid}
		if old, ok := r.up[ino]; ok && old.ok && (!e.ok || old.parent < e.parent || old.parent == e.parent && old.name <= e.name) {
			continue
		}
		r.up[ino] = e
	}
	return rows.Err()
}

// joinName is the path of the entry name in the directory at dir (clean
// and absolute): one allocation, where path.Join makes two and cleans.
func joinName(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// diffGens lists the changes from the state at generation ga to the state
// at gb, sorted by path (for a path whose kind changed, the deletion
// first).
//
// Cost: a fixed number of set-based queries that read only rows changed
// between ga and gb, found through the generation indexes, and the rows
// they lead to through the primary keys: the entry rows changed (two
// range scans), the inode rows changed at each end (two more), the rows
// of inodes renamed without changing (one query per end), and, for the
// directories that hold changed entries and the inodes changed in place,
// their entries up to the root (one recursive query per end and one over
// the span, however deep the tree). Each directory's path is built once.
// A directory that was moved (it is there at both ends, under another
// path) costs two queries more, for its entries that did not change and
// move with it and for their inode rows. So a run that created or
// deleted 20,000 files costs about ten queries of at most some 20,000
// rows each, not one query per file or path. Time and memory grow with
// the rows changed, the entries of moved directories and the length of
// the paths listed; never with the size of the vault.
//
// It never reads a subtree that neither changed nor moved, never walks a
// path to the root once per change, and never writes.
func diffGens(ctx context.Context, q querier, ga, gb int64) ([]Change, error) {
	rows, err := diffRows(ctx, q, ga, gb)
	if err != nil {
		return nil, err
	}
	out := make([]Change, len(rows))
	for i, r := range rows {
		out[i] = r.Change
	}
	return out, nil
}

// changeRows is a change with the inode rows on each side (nil: none).
type changeRows struct {
	Change
	a, b *inode
}

// diffRows is diffGens with the rows of each change.
func diffRows(ctx context.Context, q querier, ga, gb int64) ([]changeRows, error) {
	lo, hi := min(ga, gb), max(ga, gb)
	if lo == hi {
		return []changeRows{}, nil
	}
	d := &differ{ctx: ctx, q: q, lo: lo, hi: hi}
	d.ends[0] = newDiffEnd(ctx, q, ga)
	d.ends[1] = newDiffEnd(ctx, q, gb)
	hiEnd := 1 // the end at hi
	if ga == hi {
		hiEnd = 0
	}
	between := newPathResolver(ctx, q, lo, hi)

	// Entries whose (parent, name) -> ino mapping changed, with the inode
	// each names at either end. A row of such an entry that is there at
	// either end changed itself (a key has one row at a time, so a row
	// there throughout would leave no room for another): one made since
	// lo and there at hi, or one there at lo and gone by hi.
	type key struct {
		parent int64
		name   string
	}
	keys := map[key][2]int64{}
	rows, err := q.QueryContext(ctx, `SELECT parent, name, ino, 1 FROM dentries WHERE gen_from > 1 AND gen_from > ?1 AND gen_from <= ?2 AND gen_to > ?2
		UNION ALL SELECT parent, name, ino, 0 FROM dentries WHERE gen_to > ?1 AND gen_to <= ?2 AND gen_to < `+liveSQL+` AND gen_from <= ?1`, lo, hi)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k key
		var ino int64
		var atHi bool
		if err := rows.Scan(&k.parent, &k.name, &ino, &atHi); err != nil {
			rows.Close()
			return nil, err
		}
		end := 1 - hiEnd
		if atHi {
			end = hiEnd
		}
		p := keys[k]
		p[end] = ino
		keys[k] = p
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// The entries that came or went at each end, and the changed entries
	// of each directory there (which expand reads instead of querying).
	type root struct {
		parent int64
		name   string
		ino    int64
	}
	var roots [2][]root
	var parents, inos [2][]int64
	for k, p := range keys {
		for i, ino := range p {
			if ino == 0 {
				continue
			}
			e := &d.ends[i]
			e.children[k.parent] = append(e.children[k.parent], dirent{k.name, ino})
			e.named[ino] = true
			inos[i] = append(inos[i], ino)
			if p[0] != p[1] {
				roots[i] = append(roots[i], root{k.parent, k.name, ino})
				parents[i] = append(parents[i], k.parent)
			}
		}
	}
	// The inode rows that changed, at each end; an inode with one at both
	// ends changed in place (likewise, its row there throughout would
	// leave no room for another). One with a row at one end only came or
	// went, and is listed through its entries.
	for i := range d.ends {
		if err := d.ends[i].loadChanged(lo, hi); err != nil {
			return nil, err
		}
	}
	var inPlace []int64
	for ino := range d.ends[0].changed {
		if d.ends[1].changed[ino] {
			inPlace = append(inPlace, ino)
		}
	}
	if err := between.prime(inPlace); err != nil {
		return nil, err
	}
	spanPath := make([]string, len(inPlace))
	for i, ino := range inPlace {
		if spanPath[i], err = between.of(ino); err != nil {
			return nil, err
		}
		if spanPath[i] == "" {
			parents[0], parents[1] = append(parents[0], ino), append(parents[1], ino)
		}
	}
	for i := range d.ends {
		e := &d.ends[i]
		if err := e.paths.prime(parents[i]); err != nil {
			return nil, err
		}
		if err := e.load(inos[i]); err != nil {
			return nil, err
		}
	}
	for i := range roots {
		for _, r := range roots[i] {
			pp, err := d.ends[i].paths.of(r.parent)
			if err != nil {
				return nil, err
			}
			if pp == "" {
				continue // the parent has no path at that end
			}
			if err := d.expand(i, joinName(pp, r.name), r.ino, false); err != nil {
				return nil, err
			}
		}
	}
	before, after := d.ends[0].at, d.ends[1].at
	for i, ino := range inPlace {
		// A name the inode kept throughout (with hard links, the first
		// name at either end may be one that came or went).
		if ps := spanPath[i]; ps != "" {
			if _, ok := before[ps]; !ok {
				before[ps] = ino
			}
			if _, ok := after[ps]; !ok {
				after[ps] = ino
			}
			continue
		}
		pa, err := d.ends[0].paths.of(ino)
		if err != nil {
			return nil, err
		}
		pb, err := d.ends[1].paths.of(ino)
		if err != nil {
			return nil, err
		}
		if pa != "" && pb != "" {
			if _, ok := before[pa]; !ok {
				before[pa] = ino
			}
			if _, ok := after[pb]; !ok {
				after[pb] = ino
			}
		}
	}
	// Compare.
	for i := range d.ends {
		e := &d.ends[i]
		var missing []int64
		for _, ino := range e.at {
			if _, ok := e.rows[ino]; !ok {
				missing = append(missing, ino)
			}
		}
		if err := e.load(missing); err != nil {
			return nil, err
		}
	}
	out := make([]changeRows, 0, max(len(before), len(after)))
	compare := func(p string, a, b *inode) {
		switch {
		case a == nil && b == nil:
		case a == nil:
			out = append(out, changeRows{changeOf(p, "added", nil, b), nil, b})
		case b == nil:
			out = append(out, changeRows{changeOf(p, "deleted", a, nil), a, nil})
		case a.kind != b.kind:
			// Another kind of entry under the same name (a directory
			// replaced by a file, say): the one went, the other came.
			out = append(out, changeRows{changeOf(p, "deleted", a, nil), a, nil}, changeRows{changeOf(p, "added", nil, b), nil, b})
		case unchanged(a, b):
		default:
			out = append(out, changeRows{changeOf(p, "modified", a, b), a, b})
		}
	}
	for p, ia := range before {
		var b *inode
		if ib, ok := after[p]; ok {
			b = d.ends[1].rows[ib]
		}
		compare(p, d.ends[0].rows[ia], b)
	}
	for p, ib := range after {
		if _, ok := before[p]; !ok {
			compare(p, nil, d.ends[1].rows[ib])
		}
	}
	// By path; for a path whose kind changed, the deletion first.
	slices.SortFunc(out, func(x, y changeRows) int {
		if c := strings.Compare(x.Path, y.Path); c != 0 {
			return c
		}
		switch {
		case x.Op == y.Op:
			return 0
		case x.Op == "deleted":
			return -1
		case y.Op == "deleted":
			return 1
		}
		return 0
	})
	return out, nil
}

// diffInodeCols is inodeCols of the inode rows joined as i.
var diffInodeCols = "i." + strings.ReplaceAll(inodeCols, ", ", ", i.")

// dirent is an entry of a directory: a name and the inode it names.
type dirent struct {
	name string
	ino  int64
}

// diffEnd is what diffGens knows of the state at one end, generation g.
type diffEnd struct {
	ctx      context.Context
	q        querier
	g        int64
	at       map[string]int64   // path -> ino: what is compared there
	rows     map[int64]*inode   // inode rows at g (nil: none), loaded in bulk
	children map[int64][]dirent // changed entries at g, by directory
	named    map[int64]bool     // inodes a changed entry names at g
	changed  map[int64]bool     // inodes whose row at g changed
	paths    *pathResolver      // paths at g
}

func newDiffEnd(ctx context.Context, q querier, g int64) diffEnd {
	return diffEnd{ctx: ctx, q: q, g: g, at: map[string]int64{}, rows: map[int64]*inode{},
		children: map[int64][]dirent{}, named: map[int64]bool{}, changed: map[int64]bool{}, paths: newPathResolver(ctx, q, g, g)}
}

// load reads the rows at g of the inodes in inos not loaded yet, in one
// query; one with no row there is recorded as nil.
func (e *diffEnd) load(inos []int64) error {
	var list []byte
	for _, ino := range inos {
		if _, ok := e.rows[ino]; ok {
			continue
		}
		e.rows[ino] = nil
		list = appendJSONInt(list, ino)
	}
	if list == nil {
		return nil
	}
	list = append(list, ']')
	rows, err := e.q.QueryContext(e.ctx, "SELECT "+diffInodeCols+" FROM json_each(?1) j JOIN inodes i ON i.ino = j.value AND i.gen_from <= ?2 AND i.gen_to > ?2", string(list), e.g)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		in, err := scanInode(rows)
		if err != nil {
			return err
		}
		e.rows[in.ino] = in
	}
	return rows.Err()
}

// loadChanged reads the rows at g that changed between lo and hi (made
// since lo, or gone by hi) through the generation indexes, in one range
// scan rather than one probe per inode, and notes their inodes in changed.
func (e *diffEnd) loadChanged(lo, hi int64) error {
	rows, err := e.q.QueryContext(e.ctx, "SELECT "+inodeCols+" FROM inodes WHERE gen_from > 1 AND gen_from > ?1 AND gen_from <= ?2 AND gen_to > ?2"+
		" UNION ALL SELECT "+inodeCols+" FROM inodes WHERE gen_to > ?2 AND gen_to <= ?3 AND gen_to < "+liveSQL+" AND gen_from <= ?1", lo, e.g, hi)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		in, err := scanInode(rows)
		if err != nil {
			return err
		}
		e.rows[in.ino], e.changed[in.ino] = in, true
	}
	return rows.Err()
}

// appendJSONInt appends n to the JSON array of integers list ("[" when
// list is empty; the caller closes it).
func appendJSONInt(list []byte, n int64) []byte {
	if list == nil {
		list = append(list, '[')
	} else {
		list = append(list, ',')
	}
	return strconv.AppendInt(list, n, 10)
}

// differ expands the entries that came or went at the two ends of a diff.
type differ struct {
	ctx    context.Context
	q      querier
	lo, hi int64
	ends   [2]diffEnd
}

// expand records ino at path p at end i and, for a directory, everything
// beneath it. A subtree already recorded at the same place (an entry
// added inside a directory that was added too) is not walked again, so a
// deep chain of new directories costs its length, not its square. The
// entries beneath come from the changed entries already read, and, for a
// directory that exists at both ends (moved, or beneath one moved: kept
// says it is known to), from one query for its entries that did not
// change.
func (d *differ) expand(i int, p string, ino int64, kept bool) error {
	e := &d.ends[i]
	if prev, ok := e.at[p]; ok && prev == ino {
		return nil
	}
	e.at[p] = ino
	in, ok := e.rows[ino]
	if !ok {
		if err := e.load([]int64{ino}); err != nil {
			return err
		}
		in = e.rows[ino]
	}
	if in == nil || in.kind != KindDir {
		return nil
	}
	for _, c := range e.children[ino] {
		if err := d.expand(i, joinName(p, c.name), c.ino, d.ends[1-i].named[c.ino]); err != nil {
			return err
		}
	}
	if !kept && !d.ends[1-i].named[ino] {
		return nil // nothing beneath it was there at the other end
	}
	rows, err := d.q.QueryContext(d.ctx, "SELECT name, ino FROM dentries WHERE parent = ? AND gen_from <= ? AND gen_to > ?", ino, d.lo, d.hi)
	if err != nil {
		return err
	}
	var cs []dirent
	var inos []int64
	for rows.Next() {
		var c dirent
		if err := rows.Scan(&c.name, &c.ino); err != nil {
			rows.Close()
			return err
		}
		cs, inos = append(cs, c), append(inos, c.ino)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if err := e.load(inos); err != nil {
		return err
	}
	for _, c := range cs {
		if err := d.expand(i, joinName(p, c.name), c.ino, true); err != nil {
			return err
		}
	}
	return nil
}

// unchanged reports whether the entry a at a path is the same as b there:
// the same inode with the same mode, owner and extended attributes, and,
// unless a directory (whose entries are changes of their own), the same
// content, size, mtime and link target.
func unchanged(a, b *inode) bool {
	if a.ino != b.ino || a.mode != b.mode || a.uid != b.uid || a.gid != b.gid || !bytes.Equal(a.xattrs, b.xattrs) {
		return false
	}
	return a.kind == KindDir || a.size == b.size && a.mtime == b.mtime && a.target == b.target && bytes.Equal(a.chunks, b.chunks)
}

// changeOf is the change at p from inode a (nil: none) to b (nil: none).
func changeOf(p, op string, a, b *inode) Change {
	c := Change{Path: p, PathB64: wire.B64(p), Op: op}
	if a != nil {
		sz, md := a.size, wire.FileMode(a.mode)
		c.Kind, c.SizeBefore, c.ModeBefore = a.kind, &sz, &md
	}
	if b != nil {
		sz, md := b.size, wire.FileMode(b.mode)
		c.Kind, c.SizeAfter, c.ModeAfter = b.kind, &sz, &md
	}
	return c
}

// queryInts returns the integers of a one-column query.
func queryInts(ctx context.Context, q querier, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
