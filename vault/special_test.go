package vault

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"
	"golang.org/x/sys/unix"

	"avfs/wire"
)

// Named pipes and socket nodes are inodes without content: made by Mknod,
// kept by Export, Import and Sync, listed by diffs, found sound by Check.
func TestSpecialFiles(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	root, err := v.Stat(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := v.Mark(ctx, "special")
	for _, tc := range []struct {
		name string
		kind Kind
		mode fs.FileMode
	}{{"pipe", KindFifo, fs.ModeNamedPipe}, {"sock", KindSocket, fs.ModeSocket}} {
		a, err := v.Mknod(ctx, root.Ino, tc.name, NodeSpec{Kind: tc.kind, Mode: 0o640})
		if err != nil {
			t.Fatal(err)
		}
		if a.Kind != tc.kind || a.Size != 0 || a.FileMode() != tc.mode|0o640 {
			t.Errorf("%s: %+v (%v)", tc.name, a, a.FileMode())
		}
		if _, err := v.Mknod(ctx, root.Ino, tc.name, NodeSpec{Kind: tc.kind, Mode: 0o640}); !wire.HasCode(err, wire.CodeAlreadyExists) {
			t.Errorf("second %s: %v", tc.name, err)
		}
	}
	// No content to read or write.
	if _, err := v.ReadFile(ctx, "/pipe", &discard{}); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Errorf("read a fifo's content: %v", err)
	}
	if _, err := v.WriteFile(ctx, "/sock", strings.NewReader("x"), WriteOptions{Append: true}); !wire.HasCode(err, wire.CodeInvalidInput) {
		t.Errorf("wrote a socket node's content: %v", err)
	}
	ch, err := v.ChangesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]Kind{}
	for _, c := range ch {
		kinds[c.Path] = c.Kind
	}
	if kinds["/pipe"] != KindFifo || kinds["/sock"] != KindSocket {
		t.Errorf("changes %+v", ch)
	}
	mustCheck(t, v)

	// Export makes the nodes on the host; Import brings them back.
	dir := filepath.Join(t.TempDir(), "out")
	res, err := v.Export(ctx, "/", dir, false)
	if err != nil || res.Special != 2 {
		t.Fatalf("export %+v %v", res, err)
	}
	for name, want := range map[string]fs.FileMode{"pipe": fs.ModeNamedPipe | 0o640, "sock": fs.ModeSocket | 0o640} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.Mode() != want {
			t.Errorf("host %s: %v %v", name, fi.Mode(), err)
		}
	}
	res, err = v.Import(ctx, dir, "/copy")
	if err != nil || res.Special != 2 {
		t.Fatalf("import %+v %v", res, err)
	}
	for name, kind := range map[string]Kind{"/copy/pipe": KindFifo, "/copy/sock": KindSocket} {
		if e, err := v.Stat(ctx, name); err != nil || e.Kind != kind || e.Mode != 0o640 {
			t.Errorf("%s: %+v %v", name, e, err)
		}
	}

	// Sync: what a command did with special files on the host comes back.
	since := time.Now()
	time.Sleep(10 * time.Millisecond)
	m2, _ := v.Mark(ctx, "sync")
	if err := os.Remove(filepath.Join(dir, "sock")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "new-pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A regular file where the socket node was: another kind.
	if err := os.Rename(filepath.Join(dir, "pipe"), filepath.Join(dir, "moved-pipe")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pipe"), []byte("now a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Sync(ctx, dir, since); err != nil {
		t.Fatal(err)
	}
	ch, err = v.ChangesSince(ctx, m2)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range ch {
		if got[c.Path] != "" {
			got[c.Path] += ", "
		}
		got[c.Path] += c.Op + " " + c.Kind.String()
	}
	for p, want := range map[string]string{"/sock": "deleted socket", "/new-pipe": "added fifo", "/moved-pipe": "added fifo", "/pipe": "deleted fifo, added file"} {
		if got[p] != want {
			t.Errorf("%s: %q, want %q (all: %v)", p, got[p], want, got)
		}
	}
	if e, _ := v.Stat(ctx, "/moved-pipe"); e.Mode != 0o600 {
		t.Errorf("moved pipe mode %o", e.Mode)
	}
	if read(t, v, "/pipe") != "now a file" {
		t.Error("file over the pipe")
	}
	mustCheck(t, v)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// An entry replaced by one of another kind is listed as the one deleted
// and the other added, in that order.
func TestChangesWhenTheKindChanges(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/d/a", "1\n")
	write(t, v, "/f", "x\n")
	m, _ := v.Mark(ctx, "kinds")
	if _, err := v.Remove(ctx, "/d", true); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/d", "file\n")
	if _, err := v.Remove(ctx, "/f", false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Mkdir(ctx, "/f", 0o755, false); err != nil {
		t.Fatal(err)
	}
	ch, err := v.ChangesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ch {
		got = append(got, fmt.Sprintf("%s %s %s %v>%v", c.Op, c.Kind, c.Path, ptr(c.SizeBefore), ptr(c.SizeAfter)))
	}
	want := []string{"deleted dir /d 0>-", "added file /d ->5", "deleted file /d/a 2>-", "deleted file /f 2>-", "added dir /f ->0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func ptr(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// A full disk is no_space, and ENOSPC underneath, which a mount passes on
// to the writer: SQLITE_FULL, or an I/O error whose errno says so (growing
// the log's shared-memory index). Other I/O errors stay host_io.
func TestDiskFullIsENOSPC(t *testing.T) {
	cases := []struct {
		name  string
		err   sqlite3.Error
		code  wire.Code
		nospc bool
	}{
		{"SQLITE_FULL", sqlite3.Error{Code: sqlite3.ErrFull}, wire.CodeNoSpace, true},
		{"I/O error, ENOSPC", sqlite3.Error{Code: sqlite3.ErrIoErr, SystemErrno: syscall.ENOSPC}, wire.CodeNoSpace, true},
		{"I/O error, EDQUOT", sqlite3.Error{Code: sqlite3.ErrIoErr, SystemErrno: syscall.EDQUOT}, wire.CodeNoSpace, true},
		{"I/O error, EIO", sqlite3.Error{Code: sqlite3.ErrIoErr, SystemErrno: syscall.EIO}, wire.CodeHostIO, false},
	}
	for _, c := range cases {
		err := storageErr("write /f", c.err)
		if !wire.HasCode(err, c.code) || errors.Is(err, syscall.ENOSPC) != c.nospc {
			t.Errorf("%s: %v (code %s)", c.name, err, wire.CodeOf(err))
		}
	}
}

// A change of extended attributes or of the owner alone is a change: it
// is listed, and a restore lists and undoes it.
func TestChangesOfXattrsAndOwner(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/f", "x\n")
	write(t, v, "/g", "y\n")
	if _, err := v.Mkdir(ctx, "/d", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveCheckpoint(ctx, "before", ""); err != nil {
		t.Fatal(err)
	}
	m, _ := v.Mark(ctx, "attrs")
	ino := func(p string) uint64 {
		e, err := v.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return e.Ino
	}
	if err := v.SetXattr(ctx, ino("/f"), "user.note", []byte("hi"), 0); err != nil {
		t.Fatal(err)
	}
	if err := v.SetXattr(ctx, ino("/d"), "user.note", []byte("dir"), 0); err != nil {
		t.Fatal(err)
	}
	uid := uint32(4242)
	if _, err := v.SetAttr(ctx, ino("/g"), SetAttr{UID: &uid}); err != nil {
		t.Fatal(err)
	}
	ch, err := v.ChangesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ch {
		got = append(got, c.Op+" "+c.Path)
	}
	want := "modified /d,modified /f,modified /g"
	if strings.Join(got, ",") != want {
		t.Fatalf("changes %v, want %s", got, want)
	}
	res, err := v.RestoreCheckpoint(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 3 {
		t.Fatalf("restore listed %+v", res.Changes)
	}
	if names, err := v.ListXattr(ctx, ino("/f")); err != nil || len(names) != 0 {
		t.Fatalf("after restore, the xattrs of /f: %v %v", names, err)
	}
}

// A change deeper than any path limit is listed, by a mark, a checkpoint
// diff and a restore alike (each inode's path is found once: a chain of
// directories costs its length, not its square).
func TestChangesDeepChain(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	if _, err := v.SaveCheckpoint(ctx, "before", ""); err != nil {
		t.Fatal(err)
	}
	m, _ := v.Mark(ctx, "deep")
	const depth = 5000 // past the 4,096 levels a path walk once stopped at
	parent := uint64(rootIno)
	for range depth {
		a, err := v.Mknod(ctx, parent, "d", NodeSpec{Kind: KindDir, Mode: 0o755})
		if err != nil {
			t.Fatal(err)
		}
		parent = a.Ino
	}
	if _, err := v.Mknod(ctx, parent, "f", NodeSpec{Kind: KindFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	deepest := strings.Repeat("/d", depth) + "/f"
	check := func(what string, ch []Change, op string) {
		t.Helper()
		if len(ch) != depth+1 {
			t.Fatalf("%s: %d changes, want %d", what, len(ch), depth+1)
		}
		found := false
		for _, c := range ch {
			if c.Op != op {
				t.Fatalf("%s: %+v", what, c)
			}
			found = found || c.Path == deepest
		}
		if !found {
			t.Fatalf("%s: the deepest file is not listed", what)
		}
	}
	ch, err := v.ChangesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	check("since the mark", ch, "added")
	ch, err = v.Diff(ctx, "before", "")
	if err != nil {
		t.Fatal(err)
	}
	check("checkpoint diff", ch, "added")
	res, err := v.RestoreCheckpoint(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	check("restore", res.Changes, "deleted")
	if _, err := v.Stat(ctx, "/d"); err == nil {
		t.Fatal("the chain is still there after the restore")
	}
}
