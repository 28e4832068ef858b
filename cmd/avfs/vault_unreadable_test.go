package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"avfs/wire"
)

// One bad file in vaults/ does not hide the other vaults: vault list
// flags it (table and --json) and exits 0; vault delete refuses it
// without --force and removes it, with its side files, with --force.
func TestVaultListAndDeleteUnreadable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason wire.VaultFault
		why    string // in the human table
		make   func(t *testing.T, a *avfs, path string)
	}{
		{"zero-length", wire.VaultEmpty, "(unreadable: empty file)", func(t *testing.T, a *avfs, path string) {
			mustWrite(t, path, nil)
		}},
		{"truncated", wire.VaultDamaged, "(unreadable: damaged or truncated)", func(t *testing.T, a *avfs, path string) {
			a.ok("vault", "create", "truncated")
			a.write(strings.Repeat("x", 100000), "--vault", "truncated", "/big")
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2+3); err != nil {
				t.Fatal(err)
			}
		}},
		{"random-bytes", wire.VaultNotSQLite, "(unreadable: not an SQLite file)", func(t *testing.T, a *avfs, path string) {
			b := make([]byte, 8192)
			rand.Read(b)
			mustWrite(t, path, b)
		}},
		{"foreign-sqlite", wire.VaultNotAVFS, "(unreadable: not an avfs vault)", func(t *testing.T, a *avfs, path string) {
			db := openDB(t, path)
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep')"); err != nil {
				t.Fatal(err)
			}
		}},
		{"newer-schema", wire.VaultSchemaTooNew, "(unreadable: a newer avfs's vault, schema version 99)", func(t *testing.T, a *avfs, path string) {
			a.ok("vault", "create", "newer-schema")
			db := openDB(t, path)
			defer db.Close()
			if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAVFS(t)
			a.ok("vault", "create", "alpha")
			a.write("kept", "--vault", "alpha", "/a.txt")
			a.ok("vault", "create", "zzz")
			path := filepath.Join(a.home, "vaults", tc.name+".avfs")
			tc.make(t, a, path)

			// --json: the good vaults as before, the bad one with a typed error.
			var l wire.VaultList
			a.into(&l, "vault", "list")
			names := []string{}
			for _, v := range l.Vaults {
				names = append(names, v.Name)
			}
			equalSlice(t, "vaults", names, []string{"alpha", tc.name, "zzz"})
			equal(t, "kind", l.Kind, wire.VaultListKind)
			if l.Vaults[0].Error != nil || l.Vaults[0].Files != 1 || l.Vaults[0].UUID == "" || l.Vaults[2].Error != nil {
				t.Fatalf("good vaults: %+v", l.Vaults)
			}
			bad := l.Vaults[1]
			if bad.Error == nil || bad.Error.Code != wire.CodeVaultUnreadable || bad.Error.Details["reason"] != string(tc.reason) ||
				bad.Path != path || bad.Error.Message == "" {
				t.Fatalf("bad vault entry: %+v %+v", bad, bad.Error)
			}
			// Only name, path and error: no made-up zeros.
			r := a.json(nil, "vault", "list")
			entries, _ := r.doc["vaults"].([]any)
			if e, _ := entries[1].(map[string]any); len(e) != 3 {
				t.Fatalf("bad entry on the wire: %v", e)
			}

			// The table: every vault, the bad one marked; the hint on stderr.
			r = a.exec(nil, "vault", "list")
			out := string(r.stdout)
			if r.code != 0 || !strings.Contains(out, "alpha") || !strings.Contains(out, "zzz") || !strings.Contains(out, tc.why) {
				t.Fatalf("vault list: exit %d\n%s%s", r.code, out, r.stderr)
			}
			if !strings.Contains(string(r.stderr), "vault delete NAME --force") {
				t.Fatalf("no hint on stderr: %s", r.stderr)
			}

			// Delete refuses without --force and says why and what does it.
			eo := a.fail(1, "vault_unreadable", "vault", "delete", tc.name, "--yes")
			if eo["reason"] != string(tc.reason) || !strings.Contains(fmt.Sprint(eo["message"]), "--force") {
				t.Fatalf("refusal: %v", eo)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("refused delete removed the file: %v", err)
			}
			mustWrite(t, path+"-wal", []byte("stale"))
			mustWrite(t, path+"-shm", []byte("stale"))
			a.ok("vault", "delete", tc.name, "--force", "--yes")
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Errorf("%s is left (%v)", p, err)
				}
			}
			l = wire.VaultList{}
			a.into(&l, "vault", "list")
			if len(l.Vaults) != 2 || l.Vaults[0].Error != nil || l.Vaults[1].Error != nil {
				t.Fatalf("after delete: %+v", l.Vaults)
			}
			equal(t, "alpha keeps its data", a.cat("--vault", "alpha", "/a.txt"), "kept")
		})
	}
}

// vault delete never follows a symbolic link in vaults/, with or without
// --force.
func TestVaultDeleteSymlinkRefused(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "real")
	target := filepath.Join(t.TempDir(), "precious.txt")
	mustWrite(t, target, []byte("not avfs's"))
	if err := os.Symlink(target, filepath.Join(a.home, "vaults", "link.avfs")); err != nil {
		t.Fatal(err)
	}
	for _, force := range []string{"--yes", "--force"} {
		eo := a.fail(1, "invalid_input", "vault", "delete", "link", "--yes", force)
		if !strings.Contains(fmt.Sprint(eo["message"]), "symbolic link") {
			t.Fatalf("refusal: %v", eo)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "not avfs's" {
		t.Fatalf("target: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(a.home, "vaults", "link.avfs")); err != nil {
		t.Fatal(err)
	}
	// The list still shows it, flagged, beside the good one.
	var l wire.VaultList
	a.into(&l, "vault", "list")
	if len(l.Vaults) != 2 || l.Vaults[0].Name != "link" || l.Vaults[0].Error == nil || l.Vaults[1].Error != nil {
		b, _ := json.Marshal(l)
		t.Fatalf("list: %s", b)
	}
	// A good vault still deletes.
	a.ok("vault", "delete", "real", "--yes")
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
