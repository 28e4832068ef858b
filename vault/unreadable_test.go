package vault

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"avfs/wire"
)

// makeVault creates the vault name in s with a file in it and closes it.
func makeVault(t *testing.T, s *Store, name string) string {
	t.Helper()
	v, err := s.Create(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	write(t, v, "/f.txt", "data of "+name)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return s.PathOf(name)
}

// sqliteExec runs statements on the SQLite file path with the plain
// driver (no vault settings: the file keeps its journal mode).
func sqliteExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// badVaults makes, in the store, one vault file of each kind that cannot
// be opened, and returns the reason each must be reported with.
var badVaults = []struct {
	name   string
	reason wire.VaultFault
	make   func(t *testing.T, s *Store, path string)
}{
	{"zero-length", wire.VaultEmpty, func(t *testing.T, s *Store, path string) {
		writeFile(t, path, nil)
	}},
	{"random-bytes", wire.VaultNotSQLite, func(t *testing.T, s *Store, path string) {
		writeFile(t, path, randBytes(8192))
	}},
	{"text", wire.VaultNotSQLite, func(t *testing.T, s *Store, path string) {
		writeFile(t, path, []byte("hello\n"))
	}},
	{"header-only", wire.VaultDamaged, func(t *testing.T, s *Store, path string) {
		writeFile(t, path, []byte(sqliteMagic+"\x10\x00"))
	}},
	{"truncated", wire.VaultDamaged, func(t *testing.T, s *Store, path string) {
		makeVault(t, s, "truncated")
		fi, _ := os.Stat(path)
		if err := os.Truncate(path, fi.Size()/2+100); err != nil {
			t.Fatal(err)
		}
	}},
	{"truncated-at-page", wire.VaultDamaged, func(t *testing.T, s *Store, path string) {
		makeVault(t, s, "truncated-at-page")
		if err := os.Truncate(path, 2*4096); err != nil {
			t.Fatal(err)
		}
	}},
	{"foreign-sqlite", wire.VaultNotAVFS, func(t *testing.T, s *Store, path string) {
		sqliteExec(t, path, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", "INSERT INTO notes (body) VALUES ('hi')")
	}},
	{"foreign-sqlite-wal", wire.VaultNotAVFS, func(t *testing.T, s *Store, path string) {
		sqliteExec(t, path, "PRAGMA journal_mode = WAL", "CREATE TABLE notes (id INTEGER PRIMARY KEY)")
	}},
	{"foreign-sqlite-version-1", wire.VaultNotAVFS, func(t *testing.T, s *Store, path string) {
		// An older vault version: opening it would migrate it, which finds
		// it is none before writing to it.
		sqliteExec(t, path, "PRAGMA journal_mode = WAL", "CREATE TABLE notes (id INTEGER PRIMARY KEY)", "PRAGMA user_version = 1")
	}},
	{"foreign-sqlite-current-version", wire.VaultNotAVFS, func(t *testing.T, s *Store, path string) {
		sqliteExec(t, path, "PRAGMA journal_mode = WAL", "CREATE TABLE notes (id INTEGER PRIMARY KEY)", fmt.Sprintf("PRAGMA user_version = %d", schemaVersion))
	}},
	{"newer-schema", wire.VaultSchemaTooNew, func(t *testing.T, s *Store, path string) {
		makeVault(t, s, "newer-schema")
		sqliteExec(t, path, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion+1))
	}},
	{"newer-schema-rollback", wire.VaultSchemaTooNew, func(t *testing.T, s *Store, path string) {
		sqliteExec(t, path, "CREATE TABLE state (id INTEGER)", fmt.Sprintf("PRAGMA user_version = %d", schemaVersion+7))
	}},
	{"fifo", wire.VaultNotRegular, func(t *testing.T, s *Store, path string) {
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}},
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// readRegular returns the content of path, nil when it is not a regular
// file (reading a FIFO would block).
func readRegular(t *testing.T, path string) []byte {
	t.Helper()
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantUnreadable(t *testing.T, what string, err error, reason wire.VaultFault) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeVaultUnreadable || we.Details["reason"] != reason {
		t.Fatalf("%s: got %v (%#v), want vault_unreadable with reason %s", what, err, we, reason)
	}
}

// Each kind of bad file is reported by Open and List with its reason,
// without hiding the good vaults and without being changed; Delete
// refuses it unless forced, and then removes it with its side files.
func TestUnreadableVaults(t *testing.T) {
	ctx := context.Background()
	for _, tc := range badVaults {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(t.TempDir(), Options{Actor: "test"})
			makeVault(t, s, "a-good")
			makeVault(t, s, "zz-good")
			path := s.PathOf(tc.name)
			tc.make(t, s, path)
			before := readRegular(t, path)

			_, err := s.Open(ctx, tc.name)
			if tc.reason == wire.VaultNotAVFS && tc.name == "foreign-sqlite-current-version" {
				// Its version is the vault's: only reading it shows what it is.
				if err != nil {
					t.Fatalf("open: %v", err)
				}
			} else {
				wantUnreadable(t, "open", err, tc.reason)
			}

			ls, err := s.List(ctx)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if len(ls) != 3 || ls[0].Name != "a-good" || ls[2].Name != "zz-good" || ls[1].Name != tc.name {
				t.Fatalf("list: %+v", ls)
			}
			for _, i := range []int{0, 2} {
				if ls[i].Err != nil || ls[i].Info == nil || ls[i].Info.Files != 1 {
					t.Fatalf("good vault %s: %+v", ls[i].Name, ls[i])
				}
			}
			bad := ls[1]
			wantUnreadable(t, "list", bad.Err, tc.reason)
			if bad.Info != nil || !filepath.IsAbs(bad.Path) || filepath.Base(bad.Path) != tc.name+".avfs" {
				t.Fatalf("bad entry: %+v", bad)
			}
			if after := readRegular(t, path); !bytes.Equal(before, after) {
				t.Fatalf("list changed the bad file")
			}

			wantUnreadable(t, "delete without --force", s.Delete(ctx, tc.name, false), tc.reason)
			if _, err := os.Lstat(path); err != nil {
				t.Fatalf("delete without force removed the file: %v", err)
			}
			// Side files go with it.
			for _, side := range []string{"-wal", "-shm"} {
				if _, err := os.Lstat(path + side); errors.Is(err, os.ErrNotExist) {
					writeFile(t, path+side, []byte("x"))
				}
			}
			if err := s.Use(ctx, "a-good"); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, tc.name, true); err != nil {
				t.Fatalf("delete --force: %v", err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s is left: %v", p, err)
				}
			}
			if s.Current() != "a-good" {
				t.Errorf("deleting another vault changed the current one to %s", s.Current())
			}
			ls, err = s.List(ctx)
			if err != nil || len(ls) != 2 || ls[0].Err != nil || ls[1].Err != nil {
				t.Fatalf("list after delete: %+v %v", ls, err)
			}
			if err := s.Delete(ctx, tc.name, true); !wire.HasCode(err, wire.CodeVaultNotFound) {
				t.Fatalf("second delete: %v", err)
			}
		})
	}
}

// Delete never follows a symbolic link: not to a good vault, not to a bad
// file, not to nothing.
func TestDeleteRefusesSymlink(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		target func(t *testing.T, s *Store, dir string) string
	}{
		{"to-good-vault", func(t *testing.T, s *Store, dir string) string { return makeVault(t, s, "real") }},
		{"to-bad-file", func(t *testing.T, s *Store, dir string) string {
			p := filepath.Join(dir, "precious.txt")
			writeFile(t, p, []byte("not a vault, and not avfs's"))
			return p
		}},
		{"to-nothing", func(t *testing.T, s *Store, dir string) string { return filepath.Join(dir, "missing") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(t.TempDir(), Options{Actor: "test"})
			target := tc.target(t, s, t.TempDir())
			link := s.PathOf("link")
			if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(target)
			for _, force := range []bool{false, true} {
				if err := s.Delete(ctx, "link", force); !wire.HasCode(err, wire.CodeInvalidInput) {
					t.Fatalf("delete (force %v): %v, want invalid_input", force, err)
				}
			}
			if _, err := os.Lstat(link); err != nil {
				t.Fatalf("the link is gone: %v", err)
			}
			if after, _ := os.ReadFile(target); !bytes.Equal(before, after) {
				t.Fatal("the target changed")
			}
			// List shows the link as what it points to.
			ls, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range ls {
				if l.Name != "link" {
					continue
				}
				switch tc.name {
				case "to-good-vault":
					if l.Err != nil {
						t.Errorf("link to a vault: %v", l.Err)
					}
				case "to-bad-file":
					wantUnreadable(t, "list", l.Err, wire.VaultNotSQLite)
				case "to-nothing":
					wantUnreadable(t, "list", l.Err, wire.VaultDanglingLink)
				}
			}
		})
	}
}

// Deleting an unreadable fork releases its registration in its parent,
// which then deletes without --force.
func TestDeleteUnreadableForkReleasesParent(t *testing.T) {
	ctx := context.Background()
	s := NewStore(t.TempDir(), Options{Actor: "test"})
	makeVault(t, s, "parent")
	if _, err := s.ForkInfo(ctx, "parent", "child"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.PathOf("child"), randBytes(4096))
	if err := s.Delete(ctx, "child", true); err != nil {
		t.Fatal(err)
	}
	v, err := s.Open(ctx, "parent")
	if err != nil {
		t.Fatal(err)
	}
	info, err := v.Info(ctx)
	v.Close()
	if err != nil || len(info.Forks) != 0 {
		t.Fatalf("parent still lists forks %+v (%v)", info.Forks, err)
	}
	if err := s.Delete(ctx, "parent", false); err != nil {
		t.Fatalf("delete parent: %v", err)
	}
}

// A vault of a newer avfs that a live process holds is not deleted, even
// with force.
func TestDeleteNewerSchemaHeld(t *testing.T) {
	ctx := context.Background()
	s := NewStore(t.TempDir(), Options{Actor: "test"})
	path := makeVault(t, s, "newer")
	sqliteExec(t, path, fmt.Sprintf("INSERT INTO locks (name, pid, host, since_ns, info) VALUES ('mount', 1, '%s', 0, 'newer avfs')", hostname()),
		fmt.Sprintf("PRAGMA user_version = %d", schemaVersion+1))
	if err := s.Delete(ctx, "newer", true); !wire.HasCode(err, wire.CodeVaultBusy) {
		t.Fatalf("delete --force of a held newer vault: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
