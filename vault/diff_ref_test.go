package vault

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// rowAt returns the inode row of ino visible at generation g, or nil.
func rowAt(ctx context.Context, q querier, ino, g int64) (*inode, error) {
	in, err := scanInode(q.QueryRowContext(ctx, "SELECT "+inodeCols+" FROM inodes WHERE ino = ? AND gen_from <= ? AND gen_to > ?", ino, g, g))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return in, err
}

// diffGensRef is diffGens as it was before it read the changed rows in
// bulk: one query per changed entry, inode and path. Tests check that the
// two agree.
//
// diffGensRef lists the changes from the state at generation ga to the state
// at gb. It reads only rows that changed between them (and the subtrees of
// directories added, removed or moved).
func diffGensRef(ctx context.Context, q querier, ga, gb int64) ([]Change, error) {
	lo, hi := min(ga, gb), max(ga, gb)
	if lo == hi {
		return []Change{}, nil
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
	out := []Change{}
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
			out = append(out, changeOf(p, "added", nil, b))
		case b == nil:
			out = append(out, changeOf(p, "deleted", a, nil))
		case a.kind != b.kind:
			// Another kind of entry under the same name (a directory
			// replaced by a file, say): the one went, the other came.
			out = append(out, changeOf(p, "deleted", a, nil), changeOf(p, "added", nil, b))
		case unchanged(a, b):
		default:
			out = append(out, changeOf(p, "modified", a, b))
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

// TestDiffGensMatchesReference checks that diffGens lists exactly what
// diffGensRef does, from each end to the other, for the changes between
// two checkpoints of each case, and for every pair of checkpoints of a
// random workload.
func TestDiffGensMatchesReference(t *testing.T) {
	ctx := context.Background()
	mkdir := func(v *Vault, p string) error { _, err := v.Mkdir(ctx, p, 0o755, true); return err }
	put := func(v *Vault, p, s string) error {
		_, err := v.WriteFile(ctx, p, strings.NewReader(s), WriteOptions{Parents: true})
		return err
	}
	tree := func(v *Vault, root string, dirs, files int) error {
		for d := range dirs {
			for f := range files {
				if err := put(v, fmt.Sprintf("%s/p%d/d%d/f%d", root, d%3, d, f), fmt.Sprint(d, f)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	link := func(v *Vault, src, dir, name string) error {
		s, err := v.Stat(ctx, src)
		if err != nil {
			return err
		}
		d, err := v.Stat(ctx, dir)
		if err != nil {
			return err
		}
		_, err = v.Link(ctx, s.Ino, d.Ino, name)
		return err
	}
	for _, c := range []struct {
		name          string
		before, after func(v *Vault) error
		changes       int // how many diffGens lists from before to after
	}{
		{"create a tree", nil, func(v *Vault) error { return tree(v, "/t", 6, 4) }, 24 + 6 + 3 + 1},
		{"delete a tree", func(v *Vault) error { return tree(v, "/t", 6, 4) }, func(v *Vault) error { _, err := v.Remove(ctx, "/t", true); return err }, 24 + 6 + 3 + 1},
		{"move a tree", func(v *Vault) error { return tree(v, "/t", 6, 4) }, func(v *Vault) error {
			if err := mkdir(v, "/u"); err != nil {
				return err
			}
			_, err := v.Move(ctx, "/t/p1", "/u/q")
			return err
		}, 2*(1+2+8) + 1}, // /u comes; its mtime is not a change
		{"move a tree and change it", func(v *Vault) error { return tree(v, "/t", 6, 4) }, func(v *Vault) error {
			if _, err := v.Move(ctx, "/t/p1", "/q"); err != nil {
				return err
			}
			if err := put(v, "/q/d1/f0", "changed"); err != nil {
				return err
			}
			if err := put(v, "/q/d1/new", "new"); err != nil {
				return err
			}
			_, err := v.Remove(ctx, "/q/d4", true)
			return err
		}, 2*(1+2+8) - 5 + 1}, // /q/d1/f0 is added where it was deleted
		{"rename and change a file", func(v *Vault) error { return put(v, "/a/f", "1") }, func(v *Vault) error {
			if _, err := v.Move(ctx, "/a/f", "/a/g"); err != nil {
				return err
			}
			return put(v, "/a/g", "22")
		}, 2},
		{"hard links", func(v *Vault) error {
			if err := put(v, "/a/f", "1"); err != nil {
				return err
			}
			return mkdir(v, "/b")
		}, func(v *Vault) error {
			if err := link(v, "/a/f", "/b", "l"); err != nil {
				return err
			}
			return put(v, "/b/l", "changed through the new name")
		}, 2},
		{"a directory replaced by a file", func(v *Vault) error { return tree(v, "/t", 2, 2) }, func(v *Vault) error {
			if _, err := v.Remove(ctx, "/t/p0", true); err != nil {
				return err
			}
			return put(v, "/t/p0", "a file now")
		}, 1 + 1 + 2 + 1},
		{"modes and a symlink", func(v *Vault) error { return tree(v, "/t", 2, 2) }, func(v *Vault) error {
			if _, err := v.Chmod(ctx, "/t/p1", 0o700); err != nil {
				return err
			}
			if _, err := v.Chmod(ctx, "/t/p0/d0/f1", 0o600); err != nil {
				return err
			}
			_, err := v.Symlink(ctx, "p0/d0/f1", "/t/s")
			return err
		}, 3},
		{"a deep chain", nil, func(v *Vault) error {
			p := ""
			for range 50 {
				p += "/d"
			}
			return mkdir(v, p)
		}, 50},
		{"nothing", func(v *Vault) error { return put(v, "/f", "1") }, func(v *Vault) error { return nil }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, v := newVault(t)
			if c.before != nil {
				if err := c.before(v); err != nil {
					t.Fatal(err)
				}
			}
			a, err := v.SaveCheckpoint(ctx, "a", "")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.after(v); err != nil {
				t.Fatal(err)
			}
			b, err := v.SaveCheckpoint(ctx, "b", "")
			if err != nil {
				t.Fatal(err)
			}
			if n := len(checkDiffGens(t, v, a.Generation, b.Generation)); n != c.changes {
				t.Errorf("%d changes, want %d", n, c.changes)
			}
			checkDiffGens(t, v, b.Generation, a.Generation)
			if _, err := v.RestoreCheckpoint(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			checkDiffGens(t, v, b.Generation, v.generation(t))
		})
	}
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("random %d", seed), func(t *testing.T) {
			_, v := newVault(t)
			rnd := rand.New(rand.NewPCG(seed, 1))
			pick := func() string {
				p := ""
				for range 1 + rnd.IntN(3) {
					p += fmt.Sprintf("/%c", 'a'+rnd.IntN(3))
				}
				return p
			}
			var gens, ids []int64
			for step := range 300 {
				if step%30 == 0 {
					cp, err := v.SaveCheckpoint(ctx, "", "")
					if err != nil {
						t.Fatal(err)
					}
					gens, ids = append(gens, cp.Generation), append(ids, cp.ID)
				}
				// Errors (a directory where a file is asked for, a move
				// into itself) leave the vault as it was.
				switch rnd.IntN(9) {
				case 0, 1:
					_ = put(v, pick(), fmt.Sprint(step))
				case 2:
					_ = mkdir(v, pick())
				case 3:
					_, _ = v.Remove(ctx, pick(), true)
				case 4, 5:
					_, _ = v.Move(ctx, pick(), pick())
				case 6:
					_, _ = v.Chmod(ctx, pick(), uint32(0o600+rnd.IntN(0o200)))
				case 7:
					p := pick()
					_ = link(v, pick(), path.Dir(p), path.Base(p))
				case 8:
					if len(gens) > 1 && rnd.IntN(4) == 0 {
						_, _ = v.RestoreCheckpoint(ctx, fmt.Sprint(ids[rnd.IntN(len(ids))]))
					} else {
						_, _ = v.Copy(ctx, pick(), pick(), true)
					}
				}
			}
			gens = append(gens, v.generation(t))
			for _, ga := range gens {
				for _, gb := range gens {
					checkDiffGens(t, v, ga, gb)
				}
			}
		})
	}
}

// checkDiffGens fails t unless diffGens and diffGensRef agree from ga to
// gb, and returns what they list.
func checkDiffGens(t *testing.T, v *Vault, ga, gb int64) []Change {
	t.Helper()
	var got, want []Change
	err := v.view(context.Background(), "test", func(q querier, _ state) error {
		var err error
		if got, err = diffGens(context.Background(), q, ga, gb); err != nil {
			return err
		}
		want, err = diffGensRef(context.Background(), q, ga, gb)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff %d..%d:\n got %s\nwant %s", ga, gb, changesText(got), changesText(want))
	}
	return got
}

func changesText(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n  %s %s %v", c.Op, c.Path, c.Kind)
	}
	return b.String()
}

// generation is the vault's current generation.
func (v *Vault) generation(t *testing.T) int64 {
	t.Helper()
	var g int64
	if err := v.view(context.Background(), "test", func(_ querier, st state) error { g = st.gen; return nil }); err != nil {
		t.Fatal(err)
	}
	return g
}
