package vault

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"avfs/wire"
)

// treeOf describes every entry of v's tree: kind, mode, size, link
// target and a hash of the content (read through ReadFile), by path.
func treeOf(t *testing.T, v *Vault) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	err := v.Walk(ctx, "/", func(e Entry) error {
		d := fmt.Sprintf("%s %s size=%d target=%q", e.Kind, e.Mode, e.Size, e.Target)
		if e.Kind == KindFile {
			var b bytes.Buffer
			if _, err := v.ReadFile(ctx, e.Path, &b); err != nil {
				return err
			}
			d += fmt.Sprintf(" sha=%x", sha256.Sum256(b.Bytes()))
		}
		out[e.Path] = d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mkdirs(t *testing.T, v *Vault, p string) {
	t.Helper()
	if _, err := v.Mkdir(context.Background(), p, 0o755, true); err != nil {
		t.Fatal(err)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(x T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
}

// A fork's changes of every kind apply to its parent, next to the
// parent's own on other paths; afterwards the parent holds, byte for
// byte, the fork's entries at the paths the fork changed, and its own
// elsewhere, and reads them with the fork deleted.
func TestMergeAppliesForkChanges(t *testing.T) {
	ctx := context.Background()
	s, parent := newVault(t)
	big := randBytes(2*ChunkSize + 123)
	writeBytes(t, parent, "/big.bin", big)
	write(t, parent, "/keep.txt", "kept")
	write(t, parent, "/mod.txt", "before")
	write(t, parent, "/chmod.sh", "#!/bin/sh")
	write(t, parent, "/gone/a/b.txt", "b")
	write(t, parent, "/gone/c.txt", "c")
	write(t, parent, "/tofile/x", "x")
	write(t, parent, "/todir", "a file")
	write(t, parent, "/old-name", "moved")
	must[Entry](t)(parent.Symlink(ctx, "keep.txt", "/link"))
	fork := must[*Vault](t)(s.Fork(ctx, "t", "f"))
	defer fork.Close()

	// The fork: modify, add (large, empty, symlink, nested), delete a
	// tree, chmod, replace a directory by a file and a file by a
	// directory, rename, retarget a symlink.
	write(t, fork, "/mod.txt", "after")
	mkdirs(t, fork, "/new/deep")
	writeBytes(t, fork, "/new/deep/big2.bin", randBytes(3*ChunkSize+7))
	writeBytes(t, fork, "/big.bin", append(bytes.Clone(big[:ChunkSize]), randBytes(ChunkSize)...))
	write(t, fork, "/empty", "")
	must[Entry](t)(fork.Symlink(ctx, "../mod.txt", "/new/link"))
	must[int64](t)(fork.Remove(ctx, "/gone", true))
	must[Entry](t)(fork.Chmod(ctx, "/chmod.sh", 0o755))
	must[int64](t)(fork.Remove(ctx, "/tofile", true))
	write(t, fork, "/tofile", "now a file")
	must[int64](t)(fork.Remove(ctx, "/todir", false))
	write(t, fork, "/todir/inside", "now a dir")
	must[Entry](t)(fork.Move(ctx, "/old-name", "/new-name"))
	must[int64](t)(fork.Remove(ctx, "/link", false))
	must[Entry](t)(fork.Symlink(ctx, "mod.txt", "/link"))
	mkdirs(t, fork, "/emptydir")

	// The parent, meanwhile, elsewhere.
	write(t, parent, "/keep.txt", "parent changed it")
	write(t, parent, "/parent-only", "p")
	wantFork, wantParent := treeOf(t, fork), treeOf(t, parent)

	res, err := s.Merge(ctx, "f", MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || res.Into != "t" || len(res.Conflicts) != 0 || res.Unresolved != 0 || len(res.Changes) == 0 {
		t.Fatalf("result %+v", res)
	}
	got := treeOf(t, parent)
	want := maps.Clone(wantFork)
	want["/keep.txt"], want["/parent-only"] = wantParent["/keep.txt"], wantParent["/parent-only"]
	want["/"] = got["/"] // the root's mtime-free description is the same; listed for the comparison
	if !maps.Equal(got, want) {
		for _, p := range slices.Sorted(maps.Keys(mergeKeys(got, want))) {
			if got[p] != want[p] {
				t.Errorf("%s: got %q, want %q", p, got[p], want[p])
			}
		}
	}
	mustCheck(t, parent)
	// The merge's change set names what changed, as a run lists them.
	ops := map[string]string{}
	for _, c := range res.Changes {
		ops[c.Path] += c.Op
	}
	for p, op := range map[string]string{"/mod.txt": "modified", "/gone/a/b.txt": "deleted", "/new/deep/big2.bin": "added",
		"/todir": "deletedadded", "/old-name": "deleted", "/new-name": "added", "/chmod.sh": "modified"} {
		if ops[p] != op {
			t.Errorf("change of %s: %q, want %q (all: %v)", p, ops[p], op, ops)
		}
	}
	if _, ok := ops["/keep.txt"]; ok {
		t.Error("the parent's own change is listed as the merge's")
	}
	// History and audit rows, as for any write.
	log := must[[]Version](t)(parent.Log(ctx, "/mod.txt"))
	if last := log[len(log)-1]; last.Op != "merge" {
		t.Errorf("history of /mod.txt ends with %+v", last)
	}
	n := map[string]int{}
	for _, e := range must[[]AuditEntry](t)(parent.Audit(ctx, AuditQuery{})) {
		n[e.Op]++
	}
	if n["vault.merge"] != 1 || n["merge"] < len(res.Changes)-2 { // a replaced path has one row
		t.Errorf("audit rows by op: %v", n)
	}
	// The content is the parent's own: it reads with the fork gone.
	fork.Close()
	if err := s.Delete(ctx, "f", false); err != nil {
		t.Fatal(err)
	}
	if after := treeOf(t, parent); !maps.Equal(after, got) {
		t.Error("the parent's tree changed when the fork was deleted")
	}
	mustCheck(t, parent)
}

func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// Paths both sides changed differently are conflicts: without a choice
// nothing applies (merge_conflict listing them); --ours keeps the
// parent's, --theirs takes the fork's, and per-path choices do either.
func TestMergeConflicts(t *testing.T) {
	type side func(t *testing.T, v *Vault)
	wr := func(p, s string) side { return func(t *testing.T, v *Vault) { write(t, v, p, s) } }
	rm := func(p string) side {
		return func(t *testing.T, v *Vault) {
			if _, err := v.Remove(context.Background(), p, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	both := func(a, b side) side { return func(t *testing.T, v *Vault) { a(t, v); b(t, v) } }
	cases := []struct {
		name         string
		ours, theirs side
		kind         wire.MergeConflictKind // "" for no conflict
		at           string
		// The paths (under /a, /d and /n) each resolution leaves, with their content.
		wantOurs, wantTheirs map[string]string
	}{
		{"modify/modify", wr("/a", "ours"), wr("/a", "theirs"), wire.ConflictModifyModify, "/a",
			map[string]string{"/a": "ours"}, map[string]string{"/a": "theirs"}},
		{"modify/delete", wr("/a", "ours"), rm("/a"), wire.ConflictModifyDelete, "/a",
			map[string]string{"/a": "ours"}, map[string]string{}},
		{"delete/modify", rm("/a"), wr("/a", "theirs"), wire.ConflictDeleteModify, "/a",
			map[string]string{}, map[string]string{"/a": "theirs"}},
		{"add/add", wr("/n", "ours"), wr("/n", "theirs"), wire.ConflictAddAdd, "/n",
			map[string]string{"/a": "base", "/n": "ours"}, map[string]string{"/a": "base", "/n": "theirs"}},
		{"same change", wr("/a", "same"), wr("/a", "same"), "", "",
			map[string]string{"/a": "same"}, map[string]string{"/a": "same"}},
		{"file/dir", wr("/a", "ours"), both(rm("/a"), wr("/a/x", "theirs")), wire.ConflictFileDir, "/a",
			map[string]string{"/a": "ours"}, map[string]string{"/a/x": "theirs"}},
		{"fork deletes a directory the parent added to", wr("/d/new", "ours"), rm("/d"), wire.ConflictModifyDelete, "/d",
			map[string]string{"/a": "base", "/d/new": "ours"}, map[string]string{"/a": "base"}},
		{"parent deletes a directory the fork added to", rm("/d"), wr("/d/new", "theirs"), wire.ConflictDeleteModify, "/d",
			map[string]string{"/a": "base"}, map[string]string{"/a": "base", "/d/new": "theirs"}},
	}
	for _, c := range cases {
		for _, resolve := range []wire.MergeSide{"", wire.MergeOurs, wire.MergeTheirs, "take-theirs"} {
			t.Run(c.name+"/"+string(resolve), func(t *testing.T) {
				ctx := context.Background()
				s, parent := newVault(t)
				write(t, parent, "/a", "base")
				write(t, parent, "/d/x", "dx")
				fork := must[*Vault](t)(s.Fork(ctx, "t", "f"))
				defer fork.Close()
				c.ours(t, parent)
				c.theirs(t, fork)
				before := treeOf(t, parent)
				opt := MergeOptions{Resolve: resolve}
				if resolve == "take-theirs" {
					opt = MergeOptions{Take: map[string]wire.MergeSide{c.at + "/": wire.MergeTheirs}}
					if c.at == "" {
						opt.Take = nil
					}
				}
				dry, err := s.Merge(ctx, "f", MergeOptions{DryRun: true})
				if err != nil {
					t.Fatal(err)
				}
				if c.kind != "" && (len(dry.Conflicts) != 1 || dry.Conflicts[0].Kind != c.kind || dry.Conflicts[0].Path != c.at || dry.Unresolved != 1) {
					t.Fatalf("dry run conflicts %+v, want %s at %s", dry.Conflicts, c.kind, c.at)
				}
				if !maps.Equal(treeOf(t, parent), before) {
					t.Fatal("a dry run changed the parent")
				}
				res, err := s.Merge(ctx, "f", opt)
				if c.kind != "" && resolve == "" {
					if !wire.HasCode(err, wire.CodeMergeConflict) {
						t.Fatalf("merge: %v, want merge_conflict", err)
					}
					var we *wire.Error
					errors.As(err, &we)
					if list, _ := we.Details["conflicts"].([]wire.MergeConflict); len(list) != 1 || list[0].Path != c.at {
						t.Errorf("error details %+v", we.Details)
					}
					if !maps.Equal(treeOf(t, parent), before) {
						t.Fatal("a merge with conflicts changed the parent")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if c.kind != "" {
					want := wire.MergeTheirs
					if resolve == wire.MergeOurs {
						want = wire.MergeOurs
					}
					if len(res.Conflicts) != 1 || res.Conflicts[0].Resolution != want || res.Unresolved != 0 {
						t.Fatalf("conflicts %+v", res.Conflicts)
					}
				}
				wantFiles := c.wantTheirs
				if resolve == wire.MergeOurs || resolve == "" {
					wantFiles = c.wantOurs
				}
				got := map[string]string{}
				for p, d := range treeOf(t, parent) {
					if strings.HasPrefix(d, "file") {
						got[p] = read(t, parent, p)
					}
				}
				if wantFiles = maps.Clone(wantFiles); !strings.Contains(c.name, "directory") {
					wantFiles["/d/x"] = "dx" // untouched by either side
				}
				if !maps.Equal(got, wantFiles) {
					t.Errorf("files %v, want %v", got, wantFiles)
				}
				mustCheck(t, parent)
			})
		}
	}
}

// The approval hook sees the change set before anything is written; its
// refusal applies nothing. A merge past a quota fails whole.
func TestMergeRefusedAppliesNothing(t *testing.T) {
	refused := errors.New("effects policy says no")
	cases := []struct {
		name    string
		setup   func(t *testing.T, parent *Vault)
		approve func(ctx context.Context, cs []Change) error
		want    func(error) bool
	}{
		{"approve refuses", nil, func(ctx context.Context, cs []Change) error {
			if len(cs) != 3 || cs[0].Path != "/a" || cs[0].Op != "modified" || cs[1].Path != "/big" || cs[2].Path != "/c" {
				return fmt.Errorf("change set %+v", cs)
			}
			return refused
		}, func(err error) bool { return errors.Is(err, refused) }},
		{"quota", func(t *testing.T, parent *Vault) {
			mb := int64(1)
			must[Quota](t)(parent.SetQuota(context.Background(), QuotaChange{MaxSizeMB: &mb}))
		}, nil, func(err error) bool { return wire.HasCode(err, wire.CodeQuotaExceeded) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, parent := newVault(t)
			write(t, parent, "/a", "a")
			fork := must[*Vault](t)(s.Fork(ctx, "t", "f"))
			defer fork.Close()
			write(t, fork, "/a", "changed")
			writeBytes(t, fork, "/big", randBytes(2<<20))
			write(t, fork, "/c", "c")
			if c.setup != nil {
				c.setup(t, parent)
			}
			before := treeOf(t, parent)
			var chunks int
			if err := parent.rdb.QueryRow("SELECT COUNT(*) FROM chunks").Scan(&chunks); err != nil {
				t.Fatal(err)
			}
			_, err := s.Merge(ctx, "f", MergeOptions{Approve: c.approve})
			if !c.want(err) {
				t.Fatalf("merge: %v", err)
			}
			if !maps.Equal(treeOf(t, parent), before) {
				t.Fatal("a refused merge changed the parent")
			}
			var after int
			if err := parent.rdb.QueryRow("SELECT COUNT(*) FROM chunks").Scan(&after); err != nil || after != chunks {
				t.Fatalf("chunks %d -> %d (%v)", chunks, after, err)
			}
			mustCheck(t, parent)
		})
	}
}

// Bad requests and held vaults fail with typed errors and change nothing.
func TestMergeRefusals(t *testing.T) {
	ctx := context.Background()
	s, parent := newVault(t)
	write(t, parent, "/a", "a")
	fork := must[*Vault](t)(s.Fork(ctx, "t", "f"))
	defer fork.Close()
	write(t, fork, "/a", "b")
	must[*Vault](t)(s.Create(ctx, "other")).Close()
	for _, c := range []struct {
		name string
		fork string
		opt  MergeOptions
		code wire.Code
	}{
		{"not a fork", "t", MergeOptions{}, wire.CodeInvalidInput},
		{"into another vault", "f", MergeOptions{Into: "other"}, wire.CodeInvalidInput},
		{"no such fork", "nope", MergeOptions{}, wire.CodeVaultNotFound},
		{"bad side", "f", MergeOptions{Resolve: "mine"}, wire.CodeInvalidInput},
		{"bad path", "f", MergeOptions{Take: map[string]wire.MergeSide{"/a/../..": wire.MergeOurs}}, wire.CodeInvalidPath},
	} {
		if _, err := s.Merge(ctx, c.fork, c.opt); !wire.HasCode(err, c.code) {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	// A fork mounted for writing by another live process (pid 1) is busy.
	if _, err := fork.db.Exec("INSERT INTO locks (name, pid, host, since_ns) VALUES (?, 1, ?, 0)", LockMount, hostname()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx, "f", MergeOptions{}); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Errorf("merge of a mounted fork: %v", err)
	}
	if _, err := s.Merge(ctx, "f", MergeOptions{DryRun: true}); err != nil {
		t.Errorf("dry run of a mounted fork: %v", err)
	}
	if read(t, parent, "/a") != "a" {
		t.Error("a refused merge changed the parent")
	}
	if _, err := fork.db.Exec("DELETE FROM locks"); err != nil {
		t.Fatal(err)
	}
	// So is a parent in another live process's run.
	if _, err := parent.db.Exec("INSERT INTO locks (name, pid, host, since_ns) VALUES (?, 1, ?, 0)", LockRun, hostname()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx, "f", MergeOptions{}); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Errorf("merge into a parent in a run: %v", err)
	}
	if _, err := parent.db.Exec("DELETE FROM locks"); err != nil {
		t.Fatal(err)
	}
	// A detached fork has no base any more.
	if err := s.Detach(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx, "f", MergeOptions{}); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Errorf("merge of a detached fork: %v", err)
	}
}

// Two forks work at once; both merge back: the second's change to a path
// the first's merge changed is a conflict, its other changes apply.
func TestMergeParallelForks(t *testing.T) {
	ctx := context.Background()
	s, parent := newVault(t)
	write(t, parent, "/shared", "base")
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, name := range []string{"f1", "f2"} {
		wg.Go(func() {
			f, err := s.Fork(ctx, "t", name)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for i := range 20 {
				if _, err := f.WriteFile(ctx, fmt.Sprintf("/%s/%d", name, i), strings.NewReader(name), WriteOptions{Parents: true}); err != nil {
					errs <- err
					return
				}
			}
			_, err = f.WriteFile(ctx, "/shared", strings.NewReader(name), WriteOptions{})
			errs <- err
		})
	}
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Merge(ctx, "f1", MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Merge(ctx, "f2", MergeOptions{})
	if !wire.HasCode(err, wire.CodeMergeConflict) {
		t.Fatalf("second merge: %v", err)
	}
	res, err := s.Merge(ctx, "f2", MergeOptions{Take: map[string]wire.MergeSide{"/shared": wire.MergeOurs}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stat.Added != 21 || len(res.Conflicts) != 1 { // the directory and its 20 files
		t.Errorf("second merge %+v", res.Stat)
	}
	if read(t, parent, "/shared") != "f1" || read(t, parent, "/f1/7") != "f1" || read(t, parent, "/f2/19") != "f2" {
		t.Error("merged state wrong")
	}
	// Merging again changes nothing.
	again, err := s.Merge(ctx, "f2", MergeOptions{Take: map[string]wire.MergeSide{"/shared": wire.MergeOurs}})
	if err != nil || again.Applied || len(again.Changes) != 0 {
		t.Errorf("merge again: %+v %v", again, err)
	}
}

// DiffVaults compares two vaults' current states by path and content.
func TestDiffVaults(t *testing.T) {
	ctx := context.Background()
	s, parent := newVault(t)
	write(t, parent, "/same", "s")
	write(t, parent, "/mod", "1")
	write(t, parent, "/del", "d")
	fork := must[*Vault](t)(s.Fork(ctx, "t", "f"))
	defer fork.Close()
	write(t, fork, "/mod", "2")
	must[int64](t)(fork.Remove(ctx, "/del", false))
	write(t, fork, "/add", "a")
	write(t, fork, "/same", "s") // rewritten with the same bytes: no change
	other := must[*Vault](t)(s.Create(ctx, "o"))
	write(t, other, "/same", "s")
	other.Close()
	for _, c := range []struct {
		a, b string
		want []string
	}{
		{"t", "f", []string{"added /add", "deleted /del", "modified /mod"}},
		{"f", "t", []string{"deleted /add", "added /del", "modified /mod"}},
		{"t", "o", []string{"deleted /del", "deleted /mod"}},
		{"t", "t", nil},
	} {
		d, err := s.DiffVaults(ctx, c.a, c.b)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ch := range d.Changes {
			got = append(got, ch.Op+" "+ch.Path)
		}
		if !slices.Equal(got, c.want) || d.Changes == nil {
			t.Errorf("diff %s %s: %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
