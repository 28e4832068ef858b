package vault

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"avfs/wire"
)

// This file merges a fork back into its parent (Store.Merge) and compares
// the current states of two vaults (Store.DiffVaults), path by path.

// MergeOptions says how Store.Merge resolves conflicts and who approves
// the change set.
type MergeOptions struct {
	// Into is the vault to merge into; "" is the fork's parent. Another
	// vault is refused (invalid_input): the merge's base is the state the
	// parent pinned when the fork was made.
	Into string
	// DryRun computes the change set and the conflicts and changes
	// nothing; Approve is not called.
	DryRun bool
	// Resolve is the side every conflict no entry of Take names takes:
	// wire.MergeOurs, wire.MergeTheirs, or "" (none: such a conflict is
	// unresolved).
	Resolve wire.MergeSide
	// Take is the side a conflict at a path, or beneath it, takes; the
	// longest path wins. Paths are vault-absolute, cleaned by Merge.
	Take map[string]wire.MergeSide
	// Approve, when set, is called with the change set in the parent's
	// write transaction, before anything is written: an error from it
	// fails the merge (returned as is, wrapped with the operation) and
	// applies nothing. It runs with the parent's write lock held, so it
	// must not write to the parent; it may read anything else.
	Approve func(ctx context.Context, changes []Change) error
	// Unmoved refuses the merge, with conflict and nothing applied, when
	// the parent changed anything since the fork point: what is applied is
	// then exactly the fork's change set over the state it was made from
	// (a preview granted: see ApplyPreview).
	Unmoved bool
}

// mnode is an entry of a vault's tree at some generation, as a merge and a
// diff between vaults compare them.
type mnode struct {
	ino            int64
	kind           Kind
	mode, uid, gid uint32
	size, nlink    int64
	mtime          int64
	target         string
	chunks, xattrs []byte
}

// sameNode reports whether a and b (nil: no entry) hold the same thing:
// kind, mode, owner and extended attributes, and, unless directories
// (whose entries are compared as paths of their own), the same size,
// content (by chunk hash) and link target. Times and inode numbers are
// not compared: two vaults that wrote the same bytes agree.
func sameNode(a, b *mnode) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.kind != b.kind || a.mode != b.mode || a.uid != b.uid || a.gid != b.gid || !bytes.Equal(a.xattrs, b.xattrs) {
		return false
	}
	return a.kind == KindDir || a.size == b.size && a.target == b.target && bytes.Equal(trimHoles(a.chunks), trimHoles(b.chunks))
}

// trimHoles is a content map less its trailing holes, which read as zeros
// whether listed or not.
func trimHoles(chunks []byte) []byte {
	for len(chunks) >= hashLen && bytes.Equal(chunks[len(chunks)-hashLen:], zeroHash) {
		chunks = chunks[:len(chunks)-hashLen]
	}
	return chunks
}

// tree is a vault's tree at one generation: every path, "/" included.
type tree map[string]*mnode

// loadTree reads the tree visible at generation g in q: two queries, one
// for the entries and one for the inodes; time and memory grow with the
// size of the tree. A file with several names is at each of its paths.
func loadTree(ctx context.Context, q querier, g int64) (tree, error) {
	nodes := map[int64]*mnode{}
	rows, err := q.QueryContext(ctx, "SELECT ino, kind, mode, uid, gid, size, nlink, mtime_ns, target, chunks, xattrs FROM inodes WHERE gen_from <= ?1 AND gen_to > ?1", g)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		n := &mnode{}
		if err := rows.Scan(&n.ino, &n.kind, &n.mode, &n.uid, &n.gid, &n.size, &n.nlink, &n.mtime, &n.target, &n.chunks, &n.xattrs); err != nil {
			rows.Close()
			return nil, err
		}
		nodes[n.ino] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	children := map[int64][]dirent{}
	rows, err = q.QueryContext(ctx, "SELECT parent, name, ino FROM dentries WHERE gen_from <= ?1 AND gen_to > ?1", g)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var parent int64
		var c dirent
		if err := rows.Scan(&parent, &c.name, &c.ino); err != nil {
			rows.Close()
			return nil, err
		}
		children[parent] = append(children[parent], c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	root := nodes[rootIno]
	if root == nil {
		return nil, wire.Errorf(wire.CodeIntegrity, "generation %d has no root directory", g)
	}
	t := tree{"/": root}
	type item struct {
		ino int64
		p   string
	}
	stack := []item{{rootIno, "/"}}
	seen := map[int64]bool{rootIno: true}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range children[it.ino] {
			n := nodes[c.ino]
			if n == nil {
				return nil, wire.Errorf(wire.CodeIntegrity, "entry %q of inode %d names inode %d, which generation %d does not hold", c.name, it.ino, c.ino, g)
			}
			p := joinName(it.p, c.name)
			t[p] = n
			if n.kind == KindDir {
				if seen[c.ino] {
					return nil, wire.Errorf(wire.CodeIntegrity, "directory loop at inode %d", c.ino)
				}
				seen[c.ino] = true
				stack = append(stack, item{c.ino, p})
			}
		}
	}
	return t, nil
}

// parentPath is the directory of the clean absolute path p ("/" for "/").
func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// mergeChangeOf is the change at p from a (nil: none) to b (nil: none),
// as diffGens lists it.
func mergeChangeOf(p string, a, b *mnode) Change {
	op := "modified"
	switch {
	case a == nil:
		op = "added"
	case b == nil:
		op = "deleted"
	}
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

// changesBetween lists, sorted by path, what turns the entries of from
// into those of to at the paths given (all the paths of both when nil): a
// path whose kind changes is a deletion, then an addition.
func changesBetween(from, to tree, paths []string) []Change {
	if paths == nil {
		for p := range from {
			paths = append(paths, p)
		}
		for p := range to {
			if _, ok := from[p]; !ok {
				paths = append(paths, p)
			}
		}
	}
	slices.Sort(paths)
	out := []Change{}
	for _, p := range paths {
		a, b := from[p], to[p]
		if sameNode(a, b) {
			continue
		}
		if a != nil && b != nil && a.kind != b.kind {
			out = append(out, mergeChangeOf(p, a, nil), mergeChangeOf(p, nil, b))
			continue
		}
		out = append(out, mergeChangeOf(p, a, b))
	}
	return out
}

// WireChanges is cs as the wire lists changes (an envelope, a merge).
func WireChanges(cs []Change) []wire.Change {
	out := make([]wire.Change, 0, len(cs))
	for _, c := range cs {
		w := wire.Change{Path: c.Path, PathB64: wire.B64(c.Path), Op: c.Op, Kind: c.Kind.String(), SizeBefore: c.SizeBefore, SizeAfter: c.SizeAfter}
		if c.ModeBefore != nil {
			w.ModeBefore = c.ModeBefore.String()
		}
		if c.ModeAfter != nil {
			w.ModeAfter = c.ModeAfter.String()
		}
		out = append(out, w)
	}
	return out
}

// statOf counts cs by op.
func statOf(cs []Change) wire.ChangeStat {
	var s wire.ChangeStat
	for _, c := range cs {
		switch c.Op {
		case "added":
			s.Added++
		case "deleted":
			s.Deleted++
		default:
			s.Modified++
		}
	}
	return s
}

// DiffVaults compares the current states of vaults a and b, path by path:
// what turns a's tree into b's. Entries are compared as sameNode does
// (content by chunk hash, never times), so any two vaults compare, forks
// of one another or not. Each vault is read in one read transaction; both
// trees are loaded whole (time and memory grow with their size). It never
// writes.
func (s *Store) DiffVaults(ctx context.Context, a, b string) (wire.VaultDiff, error) {
	var trees [2]tree
	for i, name := range []string{a, b} {
		v, err := s.Open(ctx, name)
		if err != nil {
			return wire.VaultDiff{}, err
		}
		err = v.view(ctx, "vault diff", func(q querier, st state) error {
			var err error
			trees[i], err = loadTree(ctx, q, st.gen)
			return err
		})
		v.Close()
		if err != nil {
			return wire.VaultDiff{}, err
		}
	}
	cs := changesBetween(trees[0], trees[1], nil)
	return wire.VaultDiff{Kind: wire.VaultDiffKind, A: a, B: b, Changes: WireChanges(cs), Stat: statOf(cs)}, nil
}

// mergePlan is a three-way merge worked out: base is the parent at the
// fork point, ours the parent now, theirs the fork now; set holds what the
// merge changes in ours (a nil node: the path goes).
type mergePlan struct {
	base, ours, theirs tree
	opt                MergeOptions
	fork               string // its name, for the audit rows
	set                map[string]*mnode
	conflicts          map[string]*wire.MergeConflict
}

// result is the merged state at p.
func (m *mergePlan) result(p string) *mnode {
	if n, ok := m.set[p]; ok {
		return n
	}
	return m.ours[p]
}

// choose is the side the options give a conflict at p: the Take entry of
// p or of its nearest ancestor, else Resolve, else unresolved.
func (m *mergePlan) choose(p string) wire.MergeSide {
	for q := p; ; q = parentPath(q) {
		if side, ok := m.opt.Take[q]; ok {
			return side
		}
		if q == "/" {
			break
		}
	}
	if m.opt.Resolve != "" {
		return m.opt.Resolve
	}
	return wire.MergeUnresolved
}

// opOf is what a side did at p since the base: added, modified or deleted.
func opOf(base, side *mnode) string {
	switch {
	case base == nil:
		return "added"
	case side == nil:
		return "deleted"
	}
	return "modified"
}

// conflict records a conflict at p of kind and resolves it as the options
// say; it returns the side chosen.
func (m *mergePlan) conflict(p string, kind wire.MergeConflictKind) wire.MergeSide {
	side := m.choose(p)
	m.conflicts[p] = &wire.MergeConflict{Path: p, PathB64: wire.B64(p), Kind: kind,
		Ours: opOf(m.base[p], m.ours[p]), Theirs: opOf(m.base[p], m.theirs[p]), Resolution: side}
	return side
}

// plan works the merge out (see Store.Merge): it never writes.
func (m *mergePlan) plan() {
	m.set, m.conflicts = map[string]*mnode{}, map[string]*wire.MergeConflict{}
	var changed []string // by the fork
	for p, n := range m.theirs {
		if !sameNode(m.base[p], n) {
			changed = append(changed, p)
		}
	}
	for p := range m.base {
		if _, ok := m.theirs[p]; !ok {
			changed = append(changed, p)
		}
	}
	slices.Sort(changed)
	for _, p := range changed {
		b, o, t := m.base[p], m.ours[p], m.theirs[p]
		if sameNode(b, o) {
			m.set[p] = t
			continue
		}
		if sameNode(o, t) {
			continue // both made the same change
		}
		var kind wire.MergeConflictKind
		switch {
		case o != nil && t != nil && (o.kind == KindDir) != (t.kind == KindDir):
			kind = wire.ConflictFileDir
		case b == nil:
			kind = wire.ConflictAddAdd
		case t == nil:
			kind = wire.ConflictModifyDelete
		case o == nil:
			kind = wire.ConflictDeleteModify
		default:
			kind = wire.ConflictModifyModify
		}
		if m.conflict(p, kind) == wire.MergeTheirs {
			m.set[p] = t
		}
	}
	// The tree must hold together: every path's directory a directory. A
	// path beneath one a side deleted or replaced, which the other side
	// changed beneath, is a conflict at the highest such directory; the
	// side it resolves to keeps or drops what is beneath.
	for {
		broken := false
		for _, p := range m.resultPaths() {
			a := m.brokenAncestor(p)
			if a == "" {
				continue
			}
			broken = true
			c := m.conflicts[a]
			if c == nil {
				kind := wire.ConflictDeleteModify // the parent removed it
				if _, ok := m.set[a]; ok {
					kind = wire.ConflictModifyDelete // the fork did
				}
				if r := m.result(a); r != nil {
					kind = wire.ConflictFileDir
				}
				m.conflict(a, kind)
				c = m.conflicts[a]
				if c.Resolution != wire.MergeUnresolved {
					// Resolved for the side that kept a directory there: put it back.
					remover := wire.MergeOurs
					if _, ok := m.set[a]; ok {
						remover = wire.MergeTheirs
					}
					if c.Resolution != remover {
						if remover == wire.MergeTheirs {
							delete(m.set, a)
						} else {
							m.set[a] = m.theirs[a]
						}
						continue
					}
				}
			}
			m.drop(p)
		}
		if !broken {
			return
		}
	}
}

// resultPaths lists the paths of the merged tree, sorted.
func (m *mergePlan) resultPaths() []string {
	out := make([]string, 0, len(m.ours)+len(m.set))
	for p := range m.ours {
		if n, ok := m.set[p]; !ok || n != nil {
			out = append(out, p)
		}
	}
	for p, n := range m.set {
		if _, ok := m.ours[p]; !ok && n != nil {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// brokenAncestor is the highest ancestor of p that is not a directory in
// the merged tree ("" when all are).
func (m *mergePlan) brokenAncestor(p string) string {
	if p == "/" {
		return ""
	}
	parts := splitPath(p)
	cur := "/"
	for _, name := range parts[:len(parts)-1] {
		cur = joinName(cur, name)
		if n := m.result(cur); n == nil || n.kind != KindDir {
			return cur
		}
	}
	return ""
}

// drop takes p out of the merged tree.
func (m *mergePlan) drop(p string) {
	if _, ok := m.ours[p]; ok {
		m.set[p] = nil
	} else {
		delete(m.set, p)
	}
}

// conflictList lists the conflicts by path and counts those no choice resolved.
func (m *mergePlan) conflictList() (all []wire.MergeConflict, unresolved int) {
	all = []wire.MergeConflict{}
	for _, c := range m.conflicts {
		all = append(all, *c)
		if c.Resolution == wire.MergeUnresolved {
			unresolved++
		}
	}
	slices.SortFunc(all, func(a, b wire.MergeConflict) int { return strings.Compare(a.Path, b.Path) })
	return all, unresolved
}

// changedPaths lists the paths the merge changes in ours.
func (m *mergePlan) changedPaths() []string {
	out := make([]string, 0, len(m.set))
	for p, n := range m.set {
		if !sameNode(m.ours[p], n) {
			out = append(out, p)
		}
	}
	return out
}

// Merge merges the fork into its parent, three-way at file level: the
// base is the parent's state at the fork point (which the parent keeps
// while the fork lives), "ours" the parent's current state, "theirs" the
// fork's. A path only the fork changed since the base takes the fork's
// entry (added, replaced, deleted; its mode, owner, extended attributes,
// content, link target and mtime); one only the parent changed keeps the
// parent's; one both changed the same way stays. A path both changed
// differently is a conflict (wire.MergeConflictKind), resolved by
// opt.Take or opt.Resolve; so is a directory one side deleted or replaced
// while the other changed something beneath it. Entries are compared
// without their times. A rename is a deletion and an addition (inodes are
// not followed); a file with several names in the fork is merged as that
// many files.
//
// Everything happens in one transaction of the parent, which holds its
// write lock from before the parent's trees are read until the commit, so
// the parent cannot move in between: the change set is computed, given to
// opt.Approve, and applied, with the chunks the parent does not hold
// copied from the fork (verified against their hashes on read), a history
// version for each file written or deleted (op "merge") and an audit row
// for each path (op "merge") and one for the merge ("vault.merge"). Quotas
// are enforced as for any write: a merge past one fails whole with
// quota_exceeded. The fork is read in one read transaction of its own (a
// snapshot) and never written.
//
// Failures, each applying nothing: merge_conflict (details: conflicts,
// unresolved) when a conflict is unresolved; invalid_input when the
// vault is not a fork, opt.Into is not its parent, or the parent no
// longer pins the fork point; vault_not_found; vault_busy while the fork
// is mounted for writing or in a run, or the parent is mounted for writing
// by another process or in a run; quota_exceeded; what Approve returns.
// With opt.DryRun it computes the same result (Applied false) and never
// fails on conflicts.
func (s *Store) Merge(ctx context.Context, fork string, opt MergeOptions) (wire.MergeResult, error) {
	res := wire.MergeResult{Kind: wire.MergeResultKind, Fork: fork, DryRun: opt.DryRun, Changes: []wire.Change{}, Conflicts: []wire.MergeConflict{}}
	take := map[string]wire.MergeSide{}
	for p, side := range opt.Take {
		cp, err := CleanPath(p)
		if err != nil {
			return res, err
		}
		take[cp] = side
	}
	opt.Take = take
	for _, side := range append(slices.Collect(maps.Values(take)), opt.Resolve) {
		if side != "" && side != wire.MergeOurs && side != wire.MergeTheirs {
			return res, wire.Errorf(wire.CodeInvalidInput, "vault merge: a conflict resolves to ours or theirs, not %q", side)
		}
	}
	fv, err := s.Open(ctx, fork)
	if err != nil {
		return res, err
	}
	defer fv.Close()
	var fst state
	var theirs tree
	err = fv.view(ctx, "vault merge", func(q querier, st state) error {
		fst = st
		if st.parentName == "" {
			return wire.Errorf(wire.CodeInvalidInput, "vault %q is not a fork: there is nothing to merge it into", fork).With("vault", fork)
		}
		if !opt.DryRun {
			if err := refuseHeld(ctx, q, fork, "it is the fork"); err != nil {
				return err
			}
		}
		theirs, err = loadTree(ctx, q, st.gen)
		return err
	})
	if err != nil {
		return res, err
	}
	into := fst.parentName
	if opt.Into != "" && opt.Into != into {
		return res, wire.Errorf(wire.CodeInvalidInput, "vault merge: %q is a fork of %q, not of %q: a fork merges into its parent", fork, into, opt.Into).With("vault", fork)
	}
	res.Into, res.ForkGeneration = into, fst.parentGen
	pv, err := s.Open(ctx, into)
	if err != nil {
		return res, err
	}
	defer pv.Close()
	// work is the merge in the parent's transaction (or read transaction, for a dry run).
	work := func(q querier, st state) (*mergePlan, error) {
		if st.uuid != fst.parentUUID {
			return nil, wire.Errorf(wire.CodeInvalidInput, "vault merge: vault %q is not the one %q was forked from (it was replaced)", into, fork).With("vault", into)
		}
		var g int64
		err := q.QueryRowContext(ctx, "SELECT gen FROM forks WHERE uuid = ?", fst.uuid).Scan(&g)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, wire.Errorf(wire.CodeInvalidInput, "vault merge: %q no longer keeps the state %q was forked from", into, fork).With("vault", fork)
		}
		if err != nil {
			return nil, err
		}
		if !opt.DryRun {
			if err := refuseHeld(ctx, q, into, "it is the vault merged into"); err != nil {
				return nil, err
			}
		}
		m := &mergePlan{theirs: theirs, opt: opt, fork: fork}
		if m.base, err = loadTree(ctx, q, g); err != nil {
			return nil, err
		}
		if m.ours, err = loadTree(ctx, q, st.gen); err != nil {
			return nil, err
		}
		if opt.Unmoved {
			if err := unmoved(m.base, m.ours, into); err != nil {
				return nil, err
			}
		}
		m.plan()
		cs := changesBetween(m.ours, m.resultTree(), m.changedPaths())
		res.Changes, res.Stat = WireChanges(cs), statOf(cs)
		res.Conflicts, res.Unresolved = m.conflictList()
		if opt.DryRun {
			return m, nil
		}
		if res.Unresolved > 0 {
			return nil, conflictErr(res)
		}
		if opt.Approve != nil {
			if err := opt.Approve(ctx, cs); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	if opt.DryRun {
		err = pv.view(ctx, "vault merge", func(q querier, st state) error {
			_, err := work(q, st)
			return err
		})
		return res, err
	}
	err = pv.update(ctx, "vault merge", func(t *txn) error {
		m, err := work(t.tx, t.st)
		if err != nil {
			return err
		}
		if len(m.changedPaths()) == 0 {
			return nil
		}
		if err := (&merger{t: t, fork: fv, plan: m}).apply(); err != nil {
			return err
		}
		t.audit("vault.merge", "/", map[string]any{"fork": fork, "fork_generation": res.ForkGeneration,
			"added": res.Stat.Added, "modified": res.Stat.Modified, "deleted": res.Stat.Deleted, "conflicts": len(res.Conflicts)})
		res.Applied = true
		return nil
	})
	if err != nil {
		res.Applied = false
		return res, err
	}
	return res, nil
}

// unmoved fails with conflict when tree ours differs from base (the
// parent changed since the fork point), naming some of the paths.
func unmoved(base, ours tree, name string) error {
	var moved []string
	for p, n := range ours {
		if !sameNode(base[p], n) {
			moved = append(moved, p)
		}
	}
	for p := range base {
		if _, ok := ours[p]; !ok {
			moved = append(moved, p)
		}
	}
	if len(moved) == 0 {
		return nil
	}
	slices.Sort(moved)
	return wire.Errorf(wire.CodeConflict, "vault %q changed since the preview ran (%d paths, e.g. %s): its changes are not applied; run the command again", name, len(moved), moved[0]).
		With("vault", name).With("paths", moved[:min(len(moved), 20)]).With("changed", len(moved))
}

// conflictErr is the merge_conflict error of res.
func conflictErr(res wire.MergeResult) error {
	var list []wire.MergeConflict
	for _, c := range res.Conflicts {
		if c.Resolution == wire.MergeUnresolved {
			list = append(list, c)
		}
	}
	first := list[0]
	more := ""
	if len(list) > 1 {
		more = fmt.Sprintf(" and %d more", len(list)-1)
	}
	return wire.Errorf(wire.CodeMergeConflict, "%q and %q both changed %s (%s)%s since the fork point: choose with --ours, --theirs, --take-ours PATH or --take-theirs PATH; nothing was applied",
		res.Fork, res.Into, first.Path, first.Kind, more).With("conflicts", list).With("unresolved", len(list))
}

// refuseHeld fails with vault_busy while a live process other than this
// one holds name's mount lock (a writer mount or a materialised run, whose
// changes are not all in the file yet) or run lock.
func refuseHeld(ctx context.Context, q querier, name, role string) error {
	for _, lock := range []string{LockMount, LockRun} {
		h, err := lockHolder(ctx, q, lock)
		if err != nil {
			return err
		}
		if h == nil || !h.alive() || (h.PID == os.Getpid() && h.Host == hostname()) {
			continue
		}
		return wire.Errorf(wire.CodeVaultBusy, "vault merge: vault %q (%s) is held by %s (pid %d on %s): merge once it is released", name, role, h.Name, h.PID, h.Host).
			With("vault", name).With("holder_pid", h.PID).With("holder", h.Name)
	}
	return nil
}

// resultTree is the merged tree restricted to the paths set holds.
func (m *mergePlan) resultTree() tree {
	out := make(tree, len(m.set))
	for p, n := range m.set {
		if n != nil {
			out[p] = n
		}
	}
	return out
}

// merger applies a plan in the parent's transaction.
type merger struct {
	t    *txn
	fork *Vault
	plan *mergePlan
	inos map[string]int64 // paths the merge made: their inodes
	have map[string]bool  // chunks the parent is known to hold
}

// apply makes the parent's tree the merged one: removals deepest first,
// then additions and updates from the top down.
func (a *merger) apply() error {
	a.inos, a.have = map[string]int64{}, map[string]bool{}
	paths := a.plan.changedPaths()
	slices.Sort(paths)
	replaced := map[string]bool{}
	var removals []string
	for _, p := range paths {
		o, r := a.plan.ours[p], a.plan.set[p]
		if o != nil && (r == nil || o.kind != r.kind || o.kind != KindDir && o.nlink > 1) {
			removals = append(removals, p)
			replaced[p] = true
		}
	}
	for i := len(removals) - 1; i >= 0; i-- { // a path sorts after its directory
		if err := a.remove(removals[i]); err != nil {
			return err
		}
	}
	for _, p := range paths {
		r := a.plan.set[p]
		if r == nil {
			continue
		}
		var err error
		if o := a.plan.ours[p]; o != nil && !replaced[p] {
			err = a.update(p, o.ino, r)
		} else {
			err = a.create(p, r)
		}
		if err != nil {
			return withFile(err, p)
		}
	}
	return nil
}

// dirOf loads the directory p's entry is in.
func (a *merger) dirOf(p string) (*inode, error) {
	pp := parentPath(p)
	ino, ok := a.inos[pp]
	if !ok {
		n := a.plan.ours[pp]
		if n == nil {
			return nil, wire.Errorf(wire.CodeInternal, "vault merge: %s has no directory", p)
		}
		ino = n.ino
	}
	return a.t.dirInode(ino)
}

// remove removes p (and anything still beneath it) from the parent.
func (a *merger) remove(p string) error {
	dir, err := a.dirOf(p)
	if err != nil {
		return err
	}
	if _, err := a.t.removeTree(dir, path.Base(p), true); err != nil {
		return err
	}
	if a.plan.set[p] == nil {
		a.t.audit("merge", p, map[string]any{"op": "deleted", "fork": a.plan.fork})
	}
	return nil
}

// create makes p as the fork's node r.
func (a *merger) create(p string, r *mnode) error {
	dir, err := a.dirOf(p)
	if err != nil {
		return err
	}
	file := r.kind == KindFile
	in, err := a.t.createSpec(dir, path.Base(p), NodeSpec{Kind: r.kind, Mode: r.mode, UID: r.uid, GID: r.gid, Target: r.target}, file)
	if err != nil {
		return err
	}
	if err := a.fill(in, r); err != nil {
		return err
	}
	if file {
		if err := a.t.recordVersion(in, dir.ino, path.Base(p), "merge"); err != nil {
			return err
		}
	}
	a.inos[p] = in.ino
	a.t.audit("merge", p, map[string]any{"op": "added", "fork": a.plan.fork, "kind": r.kind.String()})
	return nil
}

// update makes the parent's inode ino at p hold the fork's node r (of
// the same kind).
func (a *merger) update(p string, ino int64, r *mnode) error {
	in, err := getInode(a.t.ctx, a.t.tx, ino)
	if err != nil {
		return err
	}
	in.mode, in.uid, in.gid, in.target, in.ctime = r.mode, r.uid, r.gid, r.target, a.t.now
	if err := a.fill(in, r); err != nil {
		return err
	}
	if err := a.t.recordVersionAt(in, p, "merge"); err != nil {
		return err
	}
	a.t.audit("merge", p, map[string]any{"op": "modified", "fork": a.plan.fork, "kind": r.kind.String()})
	return nil
}

// fill gives in the fork's content (copying the chunks the parent lacks),
// size, extended attributes and mtime, and saves it.
func (a *merger) fill(in *inode, r *mnode) error {
	if r.kind == KindFile {
		if err := a.copyChunks(r.chunks); err != nil {
			return err
		}
		in.chunks = bytes.Clone(r.chunks)
	}
	if r.kind != KindDir {
		in.size = r.size
	}
	in.xattrs, in.mtime = bytes.Clone(r.xattrs), r.mtime
	return a.t.saveInode(in)
}

// copyChunks makes sure the parent holds every chunk of a content map,
// copying those it lacks from the fork (chunkData verifies them).
func (a *merger) copyChunks(chunks []byte) error {
	t := a.t
	for i := 0; i+hashLen <= len(chunks); i += hashLen {
		h := chunks[i : i+hashLen]
		if a.have[string(h)] || bytes.Equal(h, zeroHash) {
			continue
		}
		var one int
		err := t.tx.QueryRowContext(t.ctx, "SELECT 1 FROM chunks WHERE hash = ?", h).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			data, err := a.fork.chunkData(t.ctx, a.fork.r, h)
			if err != nil {
				return err
			}
			if _, err := t.tx.ExecContext(t.ctx, "INSERT INTO chunks (hash, size, data) VALUES (?, ?, ?)", h, len(data), data); err != nil {
				return err
			}
			t.st.chunkBytes += int64(len(data))
		} else if err != nil {
			return err
		}
		a.have[string(h)] = true
	}
	return nil
}
