package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"avfs/bundles"
	"avfs/wire"
)

func TestAuditKeyMadeOnFirstUse(t *testing.T) {
	home := t.TempDir()
	if key, err := loadAuditKey(home, false); key != nil || err != nil {
		t.Fatalf("verify-time load of a missing key: %x %v", key, err)
	}
	key, err := loadAuditKey(home, true)
	if err != nil || len(key) != auditKeySize {
		t.Fatalf("first use: %x %v", key, err)
	}
	again, err := loadAuditKey(home, true)
	if err != nil || !bytes.Equal(key, again) {
		t.Fatalf("second use made another key: %v", err)
	}
	for p, mode := range map[string]os.FileMode{auditKeyPath(home): 0o600, filepath.Dir(auditKeyPath(home)): 0o700} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode().Perm() != mode {
			t.Fatalf("%s: %v %v, want mode %04o", p, fi.Mode(), err, mode)
		}
	}
	if slices.Contains(trustedPaths(home, config{}, bundles.Options{}, nil), auditKeyPath(home)) {
		t.Fatal("the audit key is among the paths proxy exec trusts: every run without a sandbox would be refused")
	}
}

func TestAuditKeyTrust(t *testing.T) {
	for _, tc := range []struct {
		name   string
		make   func(t *testing.T, home string)
		root   bool   // needs root (chown)
		reason string // in the message
	}{
		{name: "file readable by others", reason: "gives access to group or others", make: func(t *testing.T, home string) {
			must(t, os.Chmod(auditKeyPath(home), 0o644))
		}},
		{name: "file group writable", reason: "gives access to group or others", make: func(t *testing.T, home string) {
			must(t, os.Chmod(auditKeyPath(home), 0o620))
		}},
		{name: "directory world writable", reason: "group or world writable", make: func(t *testing.T, home string) {
			must(t, os.Chmod(filepath.Dir(auditKeyPath(home)), 0o777))
		}},
		{name: "file is a symlink", reason: "symbolic link", make: func(t *testing.T, home string) {
			p := auditKeyPath(home)
			must(t, os.Rename(p, p+".real"))
			must(t, os.Symlink(p+".real", p))
		}},
		{name: "directory is a symlink", reason: "symbolic link", make: func(t *testing.T, home string) {
			d := filepath.Dir(auditKeyPath(home))
			must(t, os.Rename(d, d+".real"))
			must(t, os.Symlink(d+".real", d))
		}},
		{name: "wrong size", reason: "bytes, not 32", make: func(t *testing.T, home string) {
			must(t, os.WriteFile(auditKeyPath(home), []byte("short"), 0o600))
		}},
		{name: "file owned by another user", root: true, reason: "not by avfs's user", make: func(t *testing.T, home string) {
			must(t, os.Chown(auditKeyPath(home), 65534, 65534))
		}},
		{name: "directory owned by another user", root: true, reason: "not owned by avfs's user", make: func(t *testing.T, home string) {
			must(t, os.Chown(filepath.Dir(auditKeyPath(home)), 65534, 65534))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("needs root to give the file to another user")
			}
			home := t.TempDir()
			if _, err := loadAuditKey(home, true); err != nil {
				t.Fatal(err)
			}
			tc.make(t, home)
			for _, create := range []bool{true, false} {
				key, err := loadAuditKey(home, create)
				if key != nil || !wire.HasCode(err, wire.CodeAuditKey) || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("create=%v: %x %v, want audit_key_invalid with %q", create, key, err, tc.reason)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestAuditVerifyCLI(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "w")
	a.write("1", "--vault", "w", "/a.txt")
	a.ok("checkpoint", "save", "--vault", "w", "c1")
	a.write("2", "--vault", "w", "/b.txt")
	if _, err := os.Stat(auditKeyPath(a.home)); err != nil {
		t.Fatalf("no audit key after the first change: %v", err)
	}

	// Pass: JSON and text.
	doc := a.ok("audit", "verify", "--vault", "w")
	if doc["kind"] != wire.AuditVerifyKind || doc["ok"] != true || doc["mac"] != string(wire.AuditMACChecked) ||
		doc["anchored_from"] != float64(1) || doc["checkpoints"] != float64(1) || doc["vault"] != "w" {
		t.Fatalf("verify: %v", doc)
	}
	r := a.exec(nil, "audit", "verify", "--vault", "w")
	if r.code != 0 || !strings.Contains(string(r.stdout), "audit log of w: ok (4 entries)") ||
		!strings.Contains(string(r.stdout), "MACs: checked with this installation's audit key; anchored from row 1 (4 rows)") ||
		!strings.Contains(string(r.stdout), "checkpoint heads: 1 checked") {
		t.Fatalf("verify text: exit %d %s %s", r.code, r.stdout, r.stderr)
	}

	// No key at hand: the MACs are not checked, the rest is.
	key := auditKeyPath(a.home)
	must(t, os.Rename(key, key+".away"))
	doc = a.ok("audit", "verify", "--vault", "w")
	if doc["ok"] != true || doc["mac"] != string(wire.AuditMACNoKey) {
		t.Fatalf("verify without the key: %v", doc)
	}
	if r := a.exec(nil, "audit", "verify", "--vault", "w"); r.code != 0 || !strings.Contains(string(r.stdout), "MACs: not checked: no audit key at") {
		t.Fatalf("verify text without the key: %s", r.stdout)
	}
	if _, err := os.Stat(key); err == nil {
		t.Fatal("audit verify made a key")
	}
	must(t, os.Rename(key+".away", key))

	// Fail: a forged MAC.
	db := openDB(t, filepath.Join(a.home, "vaults", "w.avfs"))
	if _, err := db.Exec("UPDATE audit SET mac = zeroblob(32) WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	eo := a.fail(1, "integrity_failed", "audit", "verify", "--vault", "w")
	probs, _ := eo["problems"].([]any)
	if eo["ok"] != false || len(probs) != 2 || eo["problems_total"] != float64(2) {
		t.Fatalf("verify failure: %v", eo)
	}
	for i, want := range []wire.AuditFault{wire.AuditMACMismatch, wire.AuditCheckpointHeadMismatch} {
		if p, _ := probs[i].(map[string]any); p["reason"] != string(want) || p["row"] != float64(2) {
			t.Fatalf("problem %d: %v, want %s at row 2", i, probs[i], want)
		}
	}
	r = a.exec(nil, "audit", "verify", "--vault", "w")
	if r.code != 1 || !strings.Contains(string(r.stdout), "row 2: mac_mismatch: ") ||
		!strings.Contains(string(r.stdout), "checkpoint 1: checkpoint_head_mismatch: ") ||
		!strings.Contains(string(r.stderr), "audit log of w: 2 problem(s)") {
		t.Fatalf("verify failure text: exit %d %s %s", r.code, r.stdout, r.stderr)
	}

	// An untrusted key file stops changes and verify alike.
	must(t, os.Chmod(key, 0o644))
	a.failIn([]byte("x"), 1, string(wire.CodeAuditKey), "write", "--vault", "w", "/c.txt")
	a.fail(1, string(wire.CodeAuditKey), "audit", "verify", "--vault", "w")
}
