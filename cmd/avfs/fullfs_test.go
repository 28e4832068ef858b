package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"avfs/tests/fullfs"
	"avfs/vault"
)

// TestReadOnlyCommandsOnFullDisk: with the vault's file system 100% full,
// the commands that only read (vault check, audit verify, ls, cat) work and
// write nothing, and a write fails with no_space. Opening a vault used to
// fail there (host_io): the first reader grows the log's shared-memory
// index. With its log (-wal) present, what only the log holds is read too.
func TestReadOnlyCommandsOnFullDisk(t *testing.T) {
	cases := []struct {
		name string
		wal  bool // the vault's log holds a commit not folded into the file
	}{
		{"log folded", false},
		{"log present", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			small := fullfs.Mount(t, 8<<20)
			staging := newAVFS(t)
			staging.write("hello\n", "/a.txt")
			files := []string{"keys/audit.key", "vaults/default.avfs"}
			want := map[string]string{"/a.txt": "hello\n"}
			if tc.wal {
				// A commit left in the log, as by a process killed before it
				// closed the vault: copied while a connection keeps it there.
				key, err := os.ReadFile(filepath.Join(staging.home, "keys", "audit.key"))
				if err != nil {
					t.Fatal(err)
				}
				v, err := vault.Open(context.Background(), filepath.Join(staging.home, "vaults", "default.avfs"), vault.Options{AuditKey: key})
				if err != nil {
					t.Fatal(err)
				}
				defer v.Close()
				if _, err := v.WriteFile(context.Background(), "/b.txt", strings.NewReader("in the log\n"), vault.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				files = append(files, "vaults/default.avfs-wal")
				want["/b.txt"] = "in the log\n"
			}
			a := &avfs{t: t, home: filepath.Join(small, "home")}
			for _, f := range files {
				copyFile(t, filepath.Join(staging.home, f), filepath.Join(a.home, f))
			}
			if tc.wal {
				if fi, err := os.Stat(filepath.Join(a.home, "vaults", "default.avfs-wal")); err != nil || fi.Size() == 0 {
					t.Fatalf("the copied log is empty: %v", err)
				}
			}
			fullfs.Fill(t, small)

			if doc := a.ok("vault", "check"); doc["ok"] != true {
				t.Fatalf("vault check: %v", doc)
			}
			if doc := a.ok("audit", "verify"); doc["ok"] != true {
				t.Fatalf("audit verify: %v", doc)
			}
			names := a.ls("/")
			if len(names) != len(want) {
				t.Fatalf("ls: %q, want %d entries", names, len(want))
			}
			for p, content := range want {
				equal(t, "cat "+p, a.cat(p), content)
			}
			a.failIn([]byte("x"), 1, "no_space", "write", "/c.txt")
			if free := fullfs.Free(t, small); free != 0 {
				t.Fatalf("%d bytes were freed: something was deleted", free)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
