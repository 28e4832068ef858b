package vault

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

func TestInodeAPI(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	dir, err := v.Mknod(ctx, RootIno, "src", NodeSpec{Kind: KindDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	f, err := v.Mknod(ctx, dir.Ino, "a.sh", NodeSpec{Kind: KindFile, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Mknod(ctx, dir.Ino, "a.sh", NodeSpec{Kind: KindFile}); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Fatalf("O_EXCL: %v", err)
	}
	// Persist whole chunks, then read at offsets across chunk borders.
	data := randBytes(2*ChunkSize + 100)
	chunks := map[int64][]byte{0: data[:ChunkSize], 1: data[ChunkSize : 2*ChunkSize], 2: data[2*ChunkSize:]}
	get := func(i int64) ([]byte, error) { return chunks[i], nil }
	if c, err := v.Persist(ctx, f.Ino, int64(len(data)), []int64{0, 1, 2}, get, time.Time{}); err != nil || c.Size() != int64(len(data)) || c.Attr().Size != int64(len(data)) {
		t.Fatalf("persist: %+v %v", c, err)
	}
	buf := make([]byte, 1000)
	n, err := v.ReadAt(ctx, f.Ino, buf, ChunkSize-500)
	if err != nil || n != 1000 || !bytes.Equal(buf, data[ChunkSize-500:ChunkSize+500]) {
		t.Fatalf("read across chunks: %d %v", n, err)
	}
	if n, err := v.ReadAt(ctx, f.Ino, buf, int64(len(data))-10); n != 10 || err != io.EOF {
		t.Fatalf("read at end: %d %v", n, err)
	}
	// Only the changed chunk is rewritten.
	snap, _ := v.Content(ctx, f.Ino)
	if _, err := v.WriteAt(ctx, f.Ino, []byte("XY"), ChunkSize+1); err != nil {
		t.Fatal(err)
	}
	after, _ := v.Content(ctx, f.Ino)
	if !bytes.Equal(snap.chunks[:hashLen], after.chunks[:hashLen]) || bytes.Equal(snap.chunks[hashLen:2*hashLen], after.chunks[hashLen:2*hashLen]) {
		t.Fatal("a small write rewrote more than its chunk")
	}
	// The old snapshot stays readable.
	old := make([]byte, 2)
	if _, err := snap.ReadAt(ctx, old, ChunkSize+1); err != nil || !bytes.Equal(old, data[ChunkSize+1:ChunkSize+3]) {
		t.Fatalf("snapshot read %v", err)
	}
	// Truncate down and up: the tail reads as zeros.
	size := int64(10)
	if _, err := v.SetAttr(ctx, f.Ino, SetAttr{Size: &size}); err != nil {
		t.Fatal(err)
	}
	size = 20
	if _, err := v.SetAttr(ctx, f.Ino, SetAttr{Size: &size}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 20)
	if _, err := v.ReadAt(ctx, f.Ino, got, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:10], data[:10]) || !bytes.Equal(got[10:], make([]byte, 10)) {
		t.Fatalf("truncate: %x", got)
	}
	// Hard link, rename over an existing file, unlink.
	if a, err := v.Link(ctx, f.Ino, RootIno, "hard"); err != nil || a.Nlink != 2 {
		t.Fatalf("link %+v %v", a, err)
	}
	if _, err := v.Mknod(ctx, RootIno, "victim", NodeSpec{Kind: KindFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := v.Rename(ctx, RootIno, "hard", RootIno, "victim", 0); err != nil {
		t.Fatal(err)
	}
	if a, _ := v.Lookup(ctx, RootIno, "victim"); a.Ino != f.Ino {
		t.Fatal("rename over did not replace")
	}
	if err := v.Rename(ctx, dir.Ino, "a.sh", RootIno, "victim", RenameNoReplace); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Fatalf("noreplace: %v", err)
	}
	if err := v.Rename(ctx, RootIno, "src", dir.Ino, "inside", 0); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Fatalf("dir into itself: %v", err)
	}
	if err := v.Rmdir(ctx, RootIno, "src"); !wire.HasCode(err, wire.CodeNotEmpty) {
		t.Fatalf("rmdir non-empty: %v", err)
	}
	if err := v.Unlink(ctx, RootIno, "src"); !wire.HasCode(err, wire.CodeIsDir) {
		t.Fatalf("unlink dir: %v", err)
	}
	// Xattrs.
	if err := v.SetXattr(ctx, f.Ino, "user.k", []byte("v"), XattrCreate); err != nil {
		t.Fatal(err)
	}
	if err := v.SetXattr(ctx, f.Ino, "user.k", []byte("v"), XattrCreate); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Fatalf("xattr create twice: %v", err)
	}
	if val, err := v.GetXattr(ctx, f.Ino, "user.k"); err != nil || string(val) != "v" {
		t.Fatalf("getxattr %q %v", val, err)
	}
	if names, _ := v.ListXattr(ctx, f.Ino); len(names) != 1 {
		t.Fatalf("listxattr %v", names)
	}
	if err := v.RemoveXattr(ctx, f.Ino, "user.k"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.GetXattr(ctx, f.Ino, "user.k"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Fatalf("removed xattr: %v", err)
	}
	ents, _ := v.ReadDir(ctx, RootIno)
	if len(ents) != 2 || ents[0].Name != "src" || ents[1].Name != "victim" {
		t.Fatalf("readdir %+v", ents)
	}
	mustCheck(t, v)
}

func TestMountLockRefusesRestoreAndSecondHolder(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	if _, err := v.SaveCheckpoint(ctx, "c", ""); err != nil {
		t.Fatal(err)
	}
	// A lock held by a live process (pid 1 stands in for another process).
	if _, err := v.db.Exec("INSERT INTO locks (name, pid, host, since_ns) VALUES (?, 1, ?, 0)", LockMount, hostname()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.RestoreCheckpoint(ctx, "c"); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Fatalf("restore under a mount: %v", err)
	}
	if err := v.Lock(ctx, LockMount, ""); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Fatalf("second lock: %v", err)
	}
	// Nor may another process change the tree: the mount's kernel caches,
	// or the copy a run syncs back, would not know of it.
	write := func(p string) error {
		_, err := v.WriteFile(ctx, p, strings.NewReader("x"), WriteOptions{})
		return err
	}
	treeChanges := map[string]func() error{
		"write":  func() error { return write("/new") },
		"mkdir":  func() error { _, err := v.Mkdir(ctx, "/d", 0o755, false); return err },
		"remove": func() error { _, err := v.Remove(ctx, "/kept", false); return err },
	}
	if err := write("/kept"); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Fatalf("write under a mount: %v", err)
	}
	if _, err := v.db.Exec("DELETE FROM locks"); err != nil {
		t.Fatal(err)
	}
	if err := write("/kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.db.Exec("INSERT INTO locks (name, pid, host, since_ns) VALUES (?, 1, ?, 0)", LockMount, hostname()); err != nil {
		t.Fatal(err)
	}
	for what, f := range treeChanges {
		err := f()
		if !wire.HasCode(err, wire.CodeVaultBusy) || !strings.Contains(err.Error(), "change it through the mount") {
			t.Errorf("%s under another process's mount: %v", what, err)
		}
	}
	// What leaves the tree alone still works.
	if _, err := v.SaveCheckpoint(ctx, "c2", ""); err != nil {
		t.Fatalf("checkpoint under a mount: %v", err)
	}
	if err := v.Event(ctx, "note", "/", nil); err != nil {
		t.Fatalf("event under a mount: %v", err)
	}
	if _, err := v.ReadFile(ctx, "/kept", io.Discard); err != nil {
		t.Fatalf("read under a mount: %v", err)
	}
	// A lock left by a dead process is taken over.
	if _, err := v.db.Exec("UPDATE locks SET pid = 2147483000"); err != nil {
		t.Fatal(err)
	}
	if err := v.Lock(ctx, LockMount, ""); err != nil {
		t.Fatalf("stale lock: %v", err)
	}
	if h, _ := v.LockHolder(ctx, LockMount); h == nil {
		t.Fatal("no holder")
	}
	// The holder changes the tree.
	for what, f := range treeChanges {
		if err := f(); err != nil {
			t.Errorf("%s by the holder: %v", what, err)
		}
	}
	if err := v.Unlock(ctx, LockMount); err != nil {
		t.Fatal(err)
	}
	if h, _ := v.LockHolder(ctx, LockMount); h != nil {
		t.Fatalf("holder after unlock: %+v", h)
	}
	if mountedHere(v.path) {
		t.Fatal("still marked as mounted here after unlock")
	}
}

func TestDirectoryPathCacheFollowsRenames(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	d, _ := v.Mknod(ctx, RootIno, "a", NodeSpec{Kind: KindDir, Mode: 0o755})
	f, _ := v.Mknod(ctx, d.Ino, "f", NodeSpec{Kind: KindFile, Mode: 0o644})
	if _, err := v.WriteAt(ctx, f.Ino, []byte("1"), 0); err != nil { // learns /a
		t.Fatal(err)
	}
	if err := v.Rename(ctx, RootIno, "a", RootIno, "b", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := v.WriteAt(ctx, f.Ino, []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	log, err := v.Log(ctx, "/b/f")
	if err != nil {
		t.Fatal(err)
	}
	if last := log[len(log)-1]; last.Path != "/b/f" {
		t.Fatalf("history records %q after the rename", last.Path)
	}
	entries, _ := v.Audit(ctx, AuditQuery{Limit: 1})
	if entries[0].Path != "/b/f" {
		t.Fatalf("audit records %q after the rename", entries[0].Path)
	}
}

func TestInodeAPIHistory(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	d, _ := v.Mknod(ctx, RootIno, "d", NodeSpec{Kind: KindDir, Mode: 0o755})
	f, err := v.Mknod(ctx, d.Ino, "f", NodeSpec{Kind: KindFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("hello")
	get := func(int64) ([]byte, error) { return data, nil }
	for i := 0; i < 2; i++ { // the second one changes nothing: no new version
		if _, err := v.Persist(ctx, f.Ino, int64(len(data)), []int64{0}, get, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	mode := uint32(0o600)
	if _, err := v.SetAttr(ctx, f.Ino, SetAttr{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SetAttr(ctx, f.Ino, SetAttr{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	if err := v.Unlink(ctx, d.Ino, "f"); err != nil {
		t.Fatal(err)
	}
	log, err := v.Log(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, ver := range log {
		if ver.N != int64(i+1) || ver.Path != "/d/f" {
			t.Fatalf("version %d: %+v", i, ver)
		}
		got = append(got, ver.Op)
	}
	if want := "create write chmod delete"; fmt.Sprint(got) != "["+want+"]" {
		t.Fatalf("history %v, want %s", got, want)
	}
	if log[1].Size != 5 || log[3].Mode != 0o600 {
		t.Fatalf("history states: %+v", log)
	}
}

// A vault in use (a writer mount, a run: any lock of a live process) is
// not deleted, --force or not: its user would go on writing to a file
// that is gone.
func TestDeleteRefusedWhileInUse(t *testing.T) {
	ctx := context.Background()
	for _, lock := range []string{LockMount, "exec"} {
		s, v := newVault(t)
		write(t, v, "/f", "keep me")
		// pid 1 stands in for another live process.
		if _, err := v.db.Exec("INSERT INTO locks (name, pid, host, since_ns, info) VALUES (?, 1, ?, 0, 'elsewhere')", lock, hostname()); err != nil {
			t.Fatal(err)
		}
		for _, force := range []bool{false, true} {
			err := s.Delete(ctx, "t", force)
			if !wire.HasCode(err, wire.CodeVaultBusy) || !strings.Contains(err.Error(), "pid 1") {
				t.Fatalf("%s lock, force %v: %v", lock, force, err)
			}
		}
		if read(t, v, "/f") != "keep me" {
			t.Fatal("content")
		}
		// The refused delete left no lock of its own behind.
		if h, err := v.LockHolder(ctx, LockMount); lock == "exec" && (err != nil || h != nil) {
			t.Fatalf("lock left by the refused delete: %+v %v", h, err)
		}
		// A dead holder's lock does not count.
		if _, err := v.db.Exec("UPDATE locks SET pid = ?", deadPID(t)); err != nil {
			t.Fatal(err)
		}
		v.Close()
		if err := s.Delete(ctx, "t", false); err != nil {
			t.Fatalf("delete after the holder died: %v", err)
		}
		if _, err := os.Stat(s.PathOf("t")); !os.IsNotExist(err) {
			t.Fatalf("vault file left: %v", err)
		}
	}
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// A writer mount reserves an inode number when a file is created and
// commits the file, with its first content, when the file is flushed.
func TestReservedCreate(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/d/keep", "x")
	d, err := v.Stat(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	r1, err := v.ReserveIno(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := v.ReserveIno(ctx)
	if err != nil || r2 == r1 {
		t.Fatalf("second reservation %d, %v (first %d)", r2, err, r1)
	}
	// Nodes made meanwhile get other numbers.
	other, err := v.Mknod(ctx, d.Ino, "other", NodeSpec{Kind: KindFile, Mode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	if other.Ino == r1 || other.Ino == r2 {
		t.Fatalf("mknod got reserved inode %d", other.Ino)
	}
	born := time.Unix(1700000000, 0)
	data := []byte("hello")
	c, err := v.CreateFile(ctx, d.Ino, "new", NodeSpec{Kind: KindFile, Mode: 0o640, Ino: r2, Time: born}, int64(len(data)), []int64{0},
		func(int64) ([]byte, error) { return data, nil }, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Attr(); a.Ino != r2 || a.Size != 5 || a.Mode != 0o640 || !a.Atime.Equal(born) {
		t.Errorf("created %+v, want ino %d, 5 bytes, mode 0640, atime %v", a, r2, born)
	}
	if got := read(t, v, "/d/new"); got != "hello" {
		t.Errorf("content %q", got)
	}
	vers, err := v.Log(ctx, "/d/new")
	if err != nil || len(vers) != 1 || vers[0].Op != "create" || vers[0].Size != 5 {
		t.Errorf("history %+v, %v: want one create version of 5 bytes", vers, err)
	}
	// The same name again, or the reserved number again, is refused and changes nothing.
	if _, err := v.CreateFile(ctx, d.Ino, "new", NodeSpec{Kind: KindFile, Mode: 0o600, Ino: r1}, 0, nil, nil, time.Time{}); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Errorf("create over an existing name: %v", err)
	}
	if _, err := v.Mknod(ctx, d.Ino, "again", NodeSpec{Kind: KindFile, Mode: 0o600, Ino: r2}); err == nil {
		t.Error("mknod with an inode number in use succeeded")
	}
	// An empty file made with the other reservation.
	if a, err := v.Mknod(ctx, d.Ino, "empty", NodeSpec{Kind: KindFile, Mode: 0o600, Ino: r1}); err != nil || a.Ino != r1 {
		t.Fatalf("mknod with reservation: %+v, %v", a, err)
	}
	// Later nodes never reuse them.
	if a, err := v.Mknod(ctx, d.Ino, "later", NodeSpec{Kind: KindFile, Mode: 0o600}); err != nil || a.Ino <= r2 {
		t.Errorf("later node %+v, %v: want an inode above %d", a, err, r2)
	}
	info, err := v.Info(ctx)
	if err != nil || info.Files != 6 {
		t.Errorf("info: %d files, %v; want 6", info.Files, err)
	}
	mustCheck(t, v)
	if rep, err := v.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Errorf("audit verify: %+v, %v", rep, err)
	}
}
