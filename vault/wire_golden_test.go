package vault

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"avfs/wire"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in ../wire/testdata/golden")

// checkWireGolden compares v's JSON with the golden file name in the wire
// package's testdata: the documents of ls, stat, log, revert and
// checkpoint diff and restore are made of these vault types.
func checkWireGolden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("..", "wire", "testdata", "golden", name+".json")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./vault -run Golden -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s changed: fields may be added, never renamed or removed.\n got %s\nwant %s", name, got, want)
	}
}

// TestGoldenModes pins the JSON of the vault types that carry file modes:
// every mode is four octal digits, special bits included.
func TestGoldenModes(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 4, 10, 0, time.UTC)
	checkWireGolden(t, "file_entry", []Entry{
		{Path: "/bin/tool", Name: "tool", Attr: Attr{Ino: 12, Kind: KindFile, Mode: 0o4755, UID: 1000, GID: 1000, Size: 5120, Nlink: 1, Mtime: at, Ctime: at, Atime: at}},
		{Path: "/tmp", Name: "tmp", Attr: Attr{Ino: 3, Kind: KindDir, Mode: 0o1777, Nlink: 2, Mtime: at, Ctime: at, Atime: at}},
		{Path: "/latest", Name: "latest", Attr: Attr{Ino: 14, Kind: KindSymlink, Mode: 0o777, Size: 8, Nlink: 1, Mtime: at, Ctime: at, Atime: at, Target: "bin/tool"}},
	})
	// Names that are not UTF-8 (made through the mount): path_b64,
	// name_b64 and target_b64 carry the bytes, as entryOf sets them.
	raws := []Entry{
		entryOf("/d/\xff\xfe.txt", &inode{ino: 15, kind: KindFile, mode: 0o644, size: 3, nlink: 1}),
		entryOf("/d/\xfe\xff.txt", &inode{ino: 16, kind: KindSymlink, mode: 0o777, size: 6, nlink: 1, target: "\xff\xfe.txt"}),
	}
	for i := range raws {
		raws[i].Mtime, raws[i].Ctime, raws[i].Atime = at, at, at
	}
	checkWireGolden(t, "file_entry_raw_names", raws)
	checkWireGolden(t, "file_version", []Version{
		{N: 1, Path: "/notes.txt", Op: "create", Time: at, Kind: KindFile, Mode: 0o644, Size: 12},
		{N: 2, Path: "/notes.txt", Op: "chmod", Time: at.Add(time.Minute), Kind: KindFile, Mode: 0o600, Size: 12},
		{N: 3, Path: "/\xff\xfe.txt", PathB64: wire.B64("/\xff\xfe.txt"), Op: "write", Time: at.Add(2 * time.Minute), Kind: KindFile, Mode: 0o600, Size: 12},
	})
	sz, before, after := int64(12), wire.FileMode(0o644), wire.FileMode(0o755)
	checkWireGolden(t, "checkpoint_changes", []Change{
		{Path: "/a.txt", Op: "added", Kind: KindFile, SizeAfter: &sz, ModeAfter: &before},
		{Path: "/run.sh", Op: "modified", Kind: KindFile, SizeBefore: &sz, SizeAfter: &sz, ModeBefore: &before, ModeAfter: &after},
		{Path: "/old.txt", Op: "deleted", Kind: KindFile, SizeBefore: &sz, ModeBefore: &before},
		changeOf("/\xfe\xff.txt", "added", nil, &inode{kind: KindFile, mode: 0o644, size: 12}),
		changeOf("/\xff\xfe.txt", "added", nil, &inode{kind: KindFile, mode: 0o644, size: 12}),
	})
}
