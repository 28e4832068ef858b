package vault

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"sort"

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
// to means the current state.
func (v *Vault) Diff(ctx context.Context, from, to string) ([]Change, error) {
	var out []Change
	err := v.view(ctx, "diff checkpoints", func(q querier, st state) error {
		a, err := findCheckpoint(ctx, q, from)
		if err != nil {
			return err
		}
		gb := st.gen
		if to != "" {
			b, err := findCheckpoint(ctx, q, to)
			if err != nil {
				return err
			}
			gb = b.Generation
		}
		out, err = diffGens(ctx, q, a.Generation, gb)
		return err
	})
	return out, err
}

// rowAt returns the inode row of ino visible at generation g, or nil.
func rowAt(ctx context.Context, q querier, ino, g int64) (*inode, error) {
	in, err := scanInode(q.QueryRowContext(ctx, "SELECT "+inodeCols+" FROM inodes WHERE ino = ? AND gen_from <= ? AND gen_to > ?", ino, g, g))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return in, err
}

// pathResolver finds the paths of inodes over one span of generations:
// a path that names the inode at every generation from lo to hi ("" when
// there is none; lo == hi asks for the path at that generation).
//
// Cost: each inode's path is its parent's path and its name, and every
// path found is kept, so resolving all the inodes of a tree costs one
// query per inode however deep it is; walking to the root for each would
// cost the depth each, the square of it for a deep chain. Memory: the
// paths kept. There is no depth limit; a directory loop (which a vault
// never holds) is an error rather than a hang.
type pathResolver struct {
	ctx    context.Context
	q      querier
	lo, hi int64
	known  map[int64]string
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
		err := r.q.QueryRowContext(r.ctx, "SELECT parent, name FROM dentries WHERE ino = ? AND gen_from <= ? AND gen_to > ? ORDER BY parent, name LIMIT 1", cur, r.lo, r.hi).Scan(&parent, &name)
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

// joinName is the path of the entry name in the directory at dir (clean
// and absolute): one allocation, where path.Join makes two and cleans.
func joinName(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// diffGens lists the changes from the state at generation ga to the state
// at gb. It reads only rows that changed between them (and the subtrees of
// directories added, removed or moved).
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
	before := map[string]int64{} // path -> ino at ga
	after := map[string]int64{}  // path -> ino at gb
	atA, atB, between := newPathResolver(ctx, q, ga, ga), newPathResolver(ctx, q, gb, gb), newPathResolver(ctx, q, lo, hi)

	// Entries whose (parent, name) -> ino mapping changed.
	type key struct {
		parent int64
		name   string
	}
	keys := map[key]bool{}
	rows, err := q.QueryContext(ctx, `SELECT parent, name FROM dentries WHERE gen_from > 1 AND gen_from > ? AND gen_from <= ?
		UNION SELECT parent, name FROM dentries WHERE gen_to > ? AND gen_to <= ? AND gen_to < ?`, lo, hi, lo, hi, live)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.parent, &k.name); err != nil {
			rows.Close()
			return nil, err
		}
		keys[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	entryAt := func(k key, g int64) (int64, error) {
		var ino int64
		err := q.QueryRowContext(ctx, "SELECT ino FROM dentries WHERE parent = ? AND name = ? AND gen_from <= ? AND gen_to > ?", k.parent, k.name, g, g).Scan(&ino)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return ino, err
	}
	// expand records ino at p and, for a directory, everything beneath
	// it. A subtree already recorded at the same place (an entry added
	// inside a directory that was added too) is not walked again, so a
	// deep chain of new directories costs its length, not its square.
	var expand func(m map[string]int64, p string, ino, g int64) error
	expand = func(m map[string]int64, p string, ino, g int64) error {
		if prev, ok := m[p]; ok && prev == ino {
			return nil
		}
		m[p] = ino
		in, err := rowAt(ctx, q, ino, g)
		if err != nil || in == nil || in.kind != KindDir {
			return err
		}
		rows, err := q.QueryContext(ctx, "SELECT name, ino FROM dentries WHERE parent = ? AND gen_from <= ? AND gen_to > ?", ino, g, g)
		if err != nil {
			return err
		}
		type child struct {
			name string
			ino  int64
		}
		var cs []child
		for rows.Next() {
			var c child
			if err := rows.Scan(&c.name, &c.ino); err != nil {
				rows.Close()
				return err
			}
			cs = append(cs, c)
		}
		rows.Close()
		for _, c := range cs {
			if err := expand(m, joinName(p, c.name), c.ino, g); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	for k := range keys {
		ia, err := entryAt(k, ga)
		if err != nil {
			return nil, err
		}
		ib, err := entryAt(k, gb)
		if err != nil {
			return nil, err
		}
		if ia == ib {
			continue
		}
		if ia != 0 {
			if pp, err := atA.of(k.parent); err != nil {
				return nil, err
			} else if pp != "" || k.parent == rootIno {
				if err := expand(before, joinName(pp, k.name), ia, ga); err != nil {
					return nil, err
				}
			}
		}
		if ib != 0 {
			if pp, err := atB.of(k.parent); err != nil {
				return nil, err
			} else if pp != "" || k.parent == rootIno {
				if err := expand(after, joinName(pp, k.name), ib, gb); err != nil {
					return nil, err
				}
			}
		}
	}
	// Inodes whose attributes or content changed in place.
	inos, err := queryInts(ctx, q, `SELECT ino FROM inodes WHERE gen_from > 1 AND gen_from > ? AND gen_from <= ?
		UNION SELECT ino FROM inodes WHERE gen_to > ? AND gen_to <= ? AND gen_to < ?`, lo, hi, lo, hi, live)
	if err != nil {
		return nil, err
	}
	for _, ino := range inos {
		// A name the inode kept throughout (with hard links, the first
		// name at either end may be one that came or went).
		if ps, err := between.of(ino); err != nil {
			return nil, err
		} else if ps != "" {
			if _, ok := before[ps]; !ok {
				before[ps] = ino
			}
			if _, ok := after[ps]; !ok {
				after[ps] = ino
			}
			continue
		}
		pa, err := atA.of(ino)
		if err != nil {
			return nil, err
		}
		pb, err := atB.of(ino)
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
	paths := map[string]bool{}
	for p := range before {
		paths[p] = true
	}
	for p := range after {
		paths[p] = true
	}
	out := []changeRows{}
	for p := range paths {
		var a, b *inode
		if ino, ok := before[p]; ok {
			if a, err = rowAt(ctx, q, ino, ga); err != nil {
				return nil, err
			}
		}
		if ino, ok := after[p]; ok {
			if b, err = rowAt(ctx, q, ino, gb); err != nil {
				return nil, err
			}
		}
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
	// By path; for a path whose kind changed, the deletion first.
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Op == "deleted" && out[j].Op != "deleted"
	})
	return out, nil
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
