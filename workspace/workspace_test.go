package workspace

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"avfs/vault"
	"avfs/wire"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		dir  string
		ok   bool
		code wire.Code
	}{
		{"/home/alice/src/app", true, ""},
		{"/tmp/x/proj", true, ""},
		{"/var/www/site", true, ""},
		{"/srv/app", true, ""},
		{"/", false, wire.CodeInvalidInput},
		{"/usr/src/app", false, wire.CodeInvalidInput}, // the sandbox shows /usr read-only
		{"/etc", false, wire.CodeInvalidInput},
		{"/tmp", false, wire.CodeInvalidInput},
		{"/home", false, wire.CodeInvalidInput},
		{"/home/alice", false, wire.CodeInvalidInput},           // the home itself
		{"/home/alice/.avfs/x", true, ""},                       // avfs's state is elsewhere here
		{"/home/alice/work", false, wire.CodeInvalidInput},      // holds avfs's state
		{"/home/alice/work/avfs", false, wire.CodeInvalidInput}, // is avfs's state
	} {
		err := Check(c.dir, "/home/alice", "/home/alice/work/avfs")
		if (err == nil) != c.ok || (err != nil && !wire.HasCode(err, c.code)) {
			t.Errorf("Check(%s) = %v, want ok %v", c.dir, err, c.ok)
		}
	}
}

func TestVaultName(t *testing.T) {
	for dir, prefix := range map[string]string{
		"/home/alice/my app": "my-app-",
		"/srv/app.v2":        "app-v2-",
		"/srv/ü.ï":           "ws-",
		"/srv/-x-":           "x-",
	} {
		name := VaultName(dir)
		if err := vault.ValidName(name); err != nil {
			t.Errorf("VaultName(%q) = %q: %v", dir, name, err)
		}
		if name[:len(prefix)] != prefix || name[len(prefix):] != ID(dir)[:8] {
			t.Errorf("VaultName(%q) = %q, want %s<8 hex of its id>", dir, name, prefix)
		}
	}
	if VaultName("/a/app") == VaultName("/b/app") {
		t.Error("two projects of one name got one vault")
	}
}

func TestBindFindUnbind(t *testing.T) {
	reg := Registry{Home: t.TempDir()}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	if bs, err := reg.Bindings(); err != nil || len(bs) != 0 {
		t.Fatalf("a new home has bindings %v, %v", bs, err)
	}
	if _, err := reg.Bind("/srv/app", "app-1", now); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Bind("/srv/app", "app-1", now.Add(time.Hour)); err != nil {
		t.Errorf("binding again to the same vault: %v", err)
	}
	if _, err := reg.Bind("/srv/app", "other", now); !wire.HasCode(err, wire.CodeAlreadyExists) {
		t.Errorf("binding to another vault: %v, want already_exists", err)
	}
	if _, err := reg.Bind("/srv/app/sub", "sub-1", now); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/srv/app": "app-1", "/srv/app/src/x": "app-1", "/srv/app/sub/y": "sub-1", "/srv/apple": "", "/": ""} {
		b, ok, err := reg.Find(path)
		if err != nil || ok != (want != "") || b.Vault != want {
			t.Errorf("Find(%s) = %+v %v %v, want vault %q", path, b, ok, err, want)
		}
	}
	bs, _ := reg.Bindings()
	if len(bs) != 2 || bs[0].Dir != "/srv/app" || !bs[0].BoundAt.Equal(now) {
		t.Errorf("Bindings = %+v", bs)
	}
	if err := reg.Unbind("/srv/app"); err != nil {
		t.Fatal(err)
	}
	if err := reg.Unbind("/srv/app"); err != nil {
		t.Errorf("unbinding twice: %v", err)
	}
	if _, ok, _ := reg.Find("/srv/app/src"); ok {
		t.Error("found after Unbind")
	}
}

// A record nobody else could have written is the only one read: a
// binding planted under another name, a symlink, or in a directory others
// may write is not a workspace.
func TestRecordsNotTrusted(t *testing.T) {
	home := t.TempDir()
	reg := Registry{Home: home}
	if _, err := reg.Bind("/srv/app", "app-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "workspaces")
	// A copy under another directory's id says nothing of that directory.
	b, _ := os.ReadFile(filepath.Join(dir, ID("/srv/app")+".json"))
	os.WriteFile(filepath.Join(dir, ID("/srv/other")+".json"), b, 0o600)
	if _, ok, _ := reg.Binding("/srv/other"); ok {
		t.Error("a record of another directory was read for /srv/other")
	}
	// A symlink is not read.
	os.Remove(filepath.Join(dir, ID("/srv/other")+".json"))
	os.Symlink(filepath.Join(dir, ID("/srv/app")+".json"), filepath.Join(dir, ID("/srv/other")+".json"))
	if _, ok, _ := reg.Binding("/srv/other"); ok {
		t.Error("a symlinked record was read")
	}
	// Nor is anything in a directory others may write.
	os.Chmod(dir, 0o777)
	if _, ok, _ := reg.Binding("/srv/app"); ok {
		t.Error("a record in a world-writable directory was read")
	}
	os.Chmod(dir, 0o700)
	if _, ok, _ := reg.Binding("/srv/app"); !ok {
		t.Error("the record is not read back once the directory is ours again")
	}
}

// A workspace is live while its claim's lock is held, whatever the record
// says; a second claim fails with vault_busy; ForVault finds it by vault.
func TestClaimLive(t *testing.T) {
	reg := Registry{Home: t.TempDir()}
	if _, err := reg.Bind("/srv/app", "app-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if l, err := reg.Live("/srv/app"); err != nil || l != nil {
		t.Fatalf("Live before any claim: %v %v", l, err)
	}
	c, err := reg.Claim("/srv/app")
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := reg.Live("/srv/app"); l != nil {
		t.Error("live before Publish")
	}
	if err := c.Publish(Live{Dir: "/srv/app", Vault: "app-1", PID: os.Getpid(), Socket: "/elsewhere.sock"}); err != nil {
		t.Fatal(err)
	}
	l, err := reg.Live("/srv/app")
	if err != nil || l == nil || l.PID != os.Getpid() {
		t.Fatalf("Live = %+v, %v", l, err)
	}
	if l.Socket != reg.Socket("/srv/app") {
		t.Errorf("the socket is the record's %q, not the one derived from the directory", l.Socket)
	}
	if f, _ := reg.ForVault("app-1"); f == nil || f.Dir != "/srv/app" {
		t.Errorf("ForVault = %+v", f)
	}
	if f, _ := reg.ForVault("other"); f != nil {
		t.Errorf("ForVault(other) = %+v", f)
	}
	if _, err := reg.Claim("/srv/app"); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Errorf("a second claim: %v, want vault_busy", err)
	}
	c.Release()
	if l, _ := reg.Live("/srv/app"); l != nil {
		t.Error("live after Release")
	}
	// A record left behind without its lock's holder is not live either.
	c2, err := reg.Claim("/srv/app")
	if err != nil {
		t.Fatal(err)
	}
	c2.Publish(Live{Dir: "/srv/app", Vault: "app-1", PID: 1})
	c2.lock.Close() // as if killed: the kernel drops the lock, the record stays
	if l, _ := reg.Live("/srv/app"); l != nil {
		t.Errorf("a dead server's record is live: %+v", l)
	}
}

// Mirror leaves the host directory as the vault: files written back,
// entries the vault does not have removed, symlinks never followed.
func TestMirror(t *testing.T) {
	ctx := context.Background()
	v, err := vault.Create(ctx, filepath.Join(t.TempDir(), "v.avfs"), "v", vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a/b"), 0o755))
	must(os.WriteFile(filepath.Join(src, "a/b/keep.txt"), []byte("vault\n"), 0o644))
	must(os.WriteFile(filepath.Join(src, "top.txt"), []byte("top\n"), 0o644))
	_, err = v.Import(ctx, src, "/")
	must(err)

	host := t.TempDir()
	outside := t.TempDir()
	must(os.WriteFile(filepath.Join(outside, "precious"), []byte("not ours"), 0o644))
	must(os.MkdirAll(filepath.Join(host, "a/b/old"), 0o755))
	must(os.WriteFile(filepath.Join(host, "a/b/keep.txt"), []byte("host, stale\n"), 0o644))
	must(os.WriteFile(filepath.Join(host, "a/b/old/x"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(host, "gone.txt"), []byte("deleted in the vault"), 0o644))
	must(os.Symlink(outside, filepath.Join(host, "link")))

	res, removed, err := Mirror(ctx, v, host)
	must(err)
	if res.Files != 2 || removed != 3 {
		t.Errorf("Mirror: %+v, removed %d; want 2 files, 3 removed (a/b/old, gone.txt, link)", res, removed)
	}
	var got []string
	filepath.Walk(host, func(p string, fi os.FileInfo, err error) error {
		if rel, _ := filepath.Rel(host, p); rel != "." {
			got = append(got, rel)
		}
		return nil
	})
	sort.Strings(got)
	want := []string{"a", "a/b", "a/b/keep.txt", "top.txt"}
	if len(got) != len(want) {
		t.Fatalf("host holds %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("host holds %v, want %v", got, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(host, "a/b/keep.txt")); string(b) != "vault\n" {
		t.Errorf("keep.txt = %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "precious")); err != nil || string(b) != "not ours" {
		t.Errorf("the symlink's target was touched: %q %v", b, err)
	}
}
