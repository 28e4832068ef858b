package vault

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"avfs/wire"
)

// Names that are not UTF-8 are stored and returned byte for byte, by the
// inode API the mount uses and by the path API the CLI uses, and every
// document that carries them has their bytes in its *_b64 fields.
func TestRawNames(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	names := map[string]string{"\xff\xfe.txt": "one\n", "\xfe\xff.txt": "two\n"}
	cp, err := v.SaveCheckpoint(ctx, "before", "")
	if err != nil {
		t.Fatal(err)
	}
	// One made through the inode API (as the mount does), one by path.
	a, err := v.Mknod(ctx, RootIno, "\xff\xfe.txt", NodeSpec{Kind: KindFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.WriteAt(ctx, a.Ino, []byte(names["\xff\xfe.txt"]), 0); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/\xfe\xff.txt", names["\xfe\xff.txt"])
	if _, err := v.Symlink(ctx, "\xff\xfe.txt", "/link\xff"); err != nil {
		t.Fatal(err)
	}
	for name, content := range names {
		if got := read(t, v, "/"+name); got != content {
			t.Errorf("read %q: %q, want %q", name, got, content)
		}
		if at, err := v.Lookup(ctx, RootIno, name); err != nil || at.Size != int64(len(content)) {
			t.Errorf("lookup %q: %+v %v", name, at, err)
		}
		en, err := v.Stat(ctx, "/"+name)
		if err != nil || en.Path != "/"+name || en.Name != name || en.PathB64 != wire.B64("/"+name) || en.NameB64 != wire.B64(name) || en.PathB64 == "" {
			t.Errorf("stat %q: %+v %v", name, en, err)
		}
	}
	if got := read(t, v, "/link\xff"); got != "one\n" { // the target is followed byte for byte
		t.Errorf("through the link: %q", got)
	}

	ents, err := v.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]Entry{}
	for _, en := range ents {
		seen[en.Name] = en
	}
	for name := range names {
		if en, ok := seen[name]; !ok || en.NameB64 == "" {
			t.Errorf("ls: %q missing or without name_b64: %+v", name, ents)
		}
	}
	if l := seen["link\xff"]; l.Target != "\xff\xfe.txt" || l.TargetB64 != wire.B64("\xff\xfe.txt") {
		t.Errorf("ls: link %+v", l)
	}
	des, err := v.ReadDir(ctx, RootIno)
	if err != nil || len(des) != 3 {
		t.Fatalf("readdir: %+v %v", des, err)
	}

	// The two names print alike as text; their JSON differs in path_b64.
	ch, err := v.Diff(ctx, cp.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range ch {
		if c.PathB64 != wire.B64(c.Path) || c.PathB64 == "" {
			t.Errorf("change %+v: path_b64 %q", c, c.PathB64)
		}
		b, _ := json.Marshal(c)
		var back struct {
			Path    string `json:"path"`
			PathB64 string `json:"path_b64"`
		}
		if err := json.Unmarshal(b, &back); err != nil || back.Path == c.Path {
			t.Errorf("JSON of %q: %s %v", c.Path, b, err)
		}
		raw, err := wire.DecodeB64("path", back.PathB64)
		if err != nil || raw != c.Path {
			t.Errorf("path_b64 of %q decodes to %q %v", c.Path, raw, err)
		}
		got[raw] = true
	}
	for _, p := range []string{"/\xff\xfe.txt", "/\xfe\xff.txt", "/link\xff"} {
		if !got[p] {
			t.Errorf("diff: %q missing from %+v", p, ch)
		}
	}

	// History, move, audit.
	vs, err := v.Log(ctx, "/\xfe\xff.txt")
	if err != nil || len(vs) == 0 || vs[0].Path != "/\xfe\xff.txt" || vs[0].PathB64 != wire.B64("/\xfe\xff.txt") {
		t.Fatalf("log: %+v %v", vs, err)
	}
	if _, err := v.Mkdir(ctx, "/d\x80", 0, false); err != nil {
		t.Fatal(err)
	}
	if en, err := v.Move(ctx, "/\xfe\xff.txt", "/d\x80/"); err != nil || en.Path != "/d\x80/\xfe\xff.txt" {
		t.Fatalf("move: %+v %v", en, err)
	}
	if got := read(t, v, "/d\x80/\xfe\xff.txt"); got != "two\n" {
		t.Errorf("moved: %q", got)
	}
	log, err := v.Audit(ctx, AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	last := log[len(log)-1]
	if last.Op != "move" || last.Path != "/\xfe\xff.txt" || last.PathB64 != wire.B64(last.Path) ||
		last.Details["to"] != "/d\uFFFD/\uFFFD\uFFFD.txt" || last.Details["to_b64"] != wire.B64("/d\x80/\xfe\xff.txt") {
		t.Errorf("audit: %+v", last)
	}
	if rep, err := v.VerifyAudit(ctx); err != nil || rep.ProblemsTotal != 0 {
		t.Errorf("audit verify: %+v %v", rep, err)
	}

	// Export and import keep the bytes.
	host := filepath.Join(t.TempDir(), "out")
	if _, err := v.Export(ctx, "/", host, false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "\xff\xfe.txt")); err != nil || string(b) != "one\n" {
		t.Errorf("exported: %q %v", b, err)
	}
	if _, err := v.Import(ctx, host, "/again"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, v, "/again/d\x80/\xfe\xff.txt"); got != "two\n" {
		t.Errorf("imported: %q", got)
	}
	mustCheck(t, v)

	// A NUL is still refused.
	if _, err := CleanPath("/a\x00b"); !wire.HasCode(err, wire.CodeInvalidPath) {
		t.Errorf("NUL: %v", err)
	}
}
