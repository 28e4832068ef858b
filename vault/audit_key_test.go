package vault

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"testing"

	"avfs/wire"
)

// auditTestRow is one audit row as someone editing the file sees it.
type auditTestRow struct {
	id, ns                   int64
	op, path, details, actor string
	mac                      []byte
}

// MAC handling of rechain.
const (
	keepMACs  = iota // no key: each row keeps the MAC it had (nobody can make new ones)
	newMACs          // with the key: every row gets the MAC of its new hash
	stripMACs        // every row loses its MAC
)

// rechain rewrites the audit log as someone holding the vault file could
// with plain SQL: edit changes the rows (deletes, edits), then the rows
// are renumbered from 1, every hash is recomputed, the MACs handled as
// macs says (with key for newMACs), and the state row points at the new
// head. Checkpoints are left alone.
func rechain(t *testing.T, path string, macs int, key []byte, edit func([]auditTestRow) []auditTestRow) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id, time_ns, op, path, details, actor, mac FROM audit ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var all []auditTestRow
	for rows.Next() {
		var r auditTestRow
		if err := rows.Scan(&r.id, &r.ns, &r.op, &r.path, &r.details, &r.actor, &r.mac); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	rows.Close()
	all = edit(all)
	if _, err := db.Exec("DELETE FROM audit"); err != nil {
		t.Fatal(err)
	}
	prev := make([]byte, 32)
	for i, r := range all {
		id := int64(i + 1)
		h := auditHash(prev, id, r.ns, r.op, r.path, r.details, r.actor)
		mac := r.mac
		switch macs {
		case newMACs:
			mac = auditMAC(key, h)
		case stripMACs:
			mac = []byte{}
		}
		if _, err := db.Exec("INSERT INTO audit (id, time_ns, op, path, details, actor, prev_hash, hash, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			id, r.ns, r.op, r.path, r.details, r.actor, prev, h, mac); err != nil {
			t.Fatal(err)
		}
		prev = h
	}
	if _, err := db.Exec("UPDATE state SET audit_id = ?, audit_hash = ?", len(all), prev); err != nil {
		t.Fatal(err)
	}
}

// without returns an edit that deletes the rows with these ids.
func without(ids ...int64) func([]auditTestRow) []auditTestRow {
	return func(rows []auditTestRow) []auditTestRow {
		var out []auditTestRow
	next:
		for _, r := range rows {
			for _, id := range ids {
				if r.id == id {
					continue next
				}
			}
			out = append(out, r)
		}
		return out
	}
}

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// keyedVault makes a vault whose audit log, written with key, is
//
//	1 vault.create, 2 write /a, 3 write /b, 4 checkpoint.save c1 (head 3),
//	5 write /c, 6 write /d, 7 checkpoint.save c2 (head 6), 8 write /e
func keyedVault(t *testing.T, key []byte) (*Store, *Vault) {
	t.Helper()
	ctx := context.Background()
	s := NewStore(t.TempDir(), Options{Actor: "test", AuditKey: key})
	v, err := s.Create(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	write(t, v, "/a", "1")
	write(t, v, "/b", "2")
	if _, err := v.SaveCheckpoint(ctx, "c1", ""); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/c", "3")
	write(t, v, "/d", "4")
	if _, err := v.SaveCheckpoint(ctx, "c2", ""); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/e", "5")
	return s, v
}

func reasons(rep AuditReport) map[wire.AuditFault]int {
	out := map[wire.AuditFault]int{}
	for _, p := range rep.Problems {
		out[p.Reason]++
	}
	return out
}

func TestVerifyAuditKeyed(t *testing.T) {
	ctx := context.Background()
	key := testKey(7)
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, path string)
		verify []byte // the key verify runs with (default key)
		noKey  bool   // verify runs without a key
		want   []wire.AuditFault
		mac    wire.AuditMACStatus
	}{
		{name: "honest", tamper: func(*testing.T, string) {}, mac: wire.AuditMACChecked},
		{name: "honest, no key at hand", tamper: func(*testing.T, string) {}, noKey: true, mac: wire.AuditMACNoKey},
		{name: "another installation's key", tamper: func(*testing.T, string) {}, verify: testKey(9),
			want: []wire.AuditFault{wire.AuditKeyMismatch}, mac: wire.AuditMACChecked},
		{name: "row deleted, re-chained without the key", tamper: func(t *testing.T, p string) { rechain(t, p, keepMACs, nil, without(5)) },
			want: []wire.AuditFault{wire.AuditMACMismatch, wire.AuditCheckpointHeadMismatch}, mac: wire.AuditMACChecked},
		{name: "row deleted, re-chained without the key, no key at hand", noKey: true,
			tamper: func(t *testing.T, p string) { rechain(t, p, keepMACs, nil, without(5)) },
			want:   []wire.AuditFault{wire.AuditCheckpointHeadMismatch}, mac: wire.AuditMACNoKey},
		{name: "row before a checkpoint deleted, re-chained with the key", tamper: func(t *testing.T, p string) { rechain(t, p, newMACs, key, without(2)) },
			want: []wire.AuditFault{wire.AuditCheckpointHeadMismatch}, mac: wire.AuditMACChecked},
		{name: "checkpoint's head row deleted, re-chained with the key", tamper: func(t *testing.T, p string) { rechain(t, p, newMACs, key, without(6)) },
			want: []wire.AuditFault{wire.AuditCheckpointHeadMismatch}, mac: wire.AuditMACChecked},
		{name: "row deleted, not re-chained", tamper: func(t *testing.T, p string) { sqliteExec(t, p, "DELETE FROM audit WHERE id = 3") },
			want: []wire.AuditFault{wire.AuditRowsMissing, wire.AuditLinkBroken, wire.AuditCheckpointHeadMissing}, mac: wire.AuditMACChecked},
		{name: "row edited", tamper: func(t *testing.T, p string) { sqliteExec(t, p, "UPDATE audit SET path = '/x' WHERE id = 5") },
			want: []wire.AuditFault{wire.AuditHashMismatch}, mac: wire.AuditMACChecked},
		{name: "row edited, hashes recomputed without the key", tamper: func(t *testing.T, p string) {
			rechain(t, p, keepMACs, nil, func(rows []auditTestRow) []auditTestRow { rows[4].path = "/x"; return rows })
		}, want: []wire.AuditFault{wire.AuditMACMismatch, wire.AuditCheckpointHeadMismatch}, mac: wire.AuditMACChecked},
		{name: "MACs stripped from row 5 on", tamper: func(t *testing.T, p string) { sqliteExec(t, p, "UPDATE audit SET mac = x'' WHERE id >= 5") },
			want: []wire.AuditFault{wire.AuditMACMissing, wire.AuditCheckpointHeadMismatch}, mac: wire.AuditMACChecked},
		{name: "every MAC stripped and re-chained", tamper: func(t *testing.T, p string) { rechain(t, p, stripMACs, nil, without(2)) },
			want: []wire.AuditFault{wire.AuditCheckpointHeadMismatch}, mac: wire.AuditMACNone},
		{name: "state head edited", tamper: func(t *testing.T, p string) { sqliteExec(t, p, "UPDATE state SET audit_id = 7") },
			want: []wire.AuditFault{wire.AuditHeadMismatch}, mac: wire.AuditMACChecked},
		// The documented limit: rows after the last checkpoint cut off the
		// end, with the state row's head moved back, are not detected.
		{name: "tail after the last checkpoint truncated (undetectable)", tamper: func(t *testing.T, p string) { rechain(t, p, keepMACs, nil, without(8)) },
			mac: wire.AuditMACChecked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, v := keyedVault(t, key)
			v.Close()
			tc.tamper(t, s.PathOf("t"))
			vk := key
			if tc.verify != nil {
				vk = tc.verify
			}
			if tc.noKey {
				vk = nil
			}
			v, err := NewStore(s.Dir, Options{Actor: "test", AuditKey: vk}).Open(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			rep, err := v.VerifyAudit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := reasons(rep)
			if rep.OK != (len(tc.want) == 0) || len(got) != len(tc.want) || rep.MAC != tc.mac || rep.ProblemsTotal != int64(len(rep.Problems)) {
				t.Fatalf("report %+v, want problems %v, mac %s", rep, tc.want, tc.mac)
			}
			for _, w := range tc.want {
				if got[w] == 0 {
					t.Fatalf("no %s in %+v", w, rep.Problems)
				}
			}
			if err := rep.Err(); rep.OK != (err == nil) || !rep.OK && !wire.HasCode(err, wire.CodeIntegrity) {
				t.Fatalf("AuditError: %v", err)
			}
			if crep, err := v.Check(ctx); err != nil || crep.OK != rep.OK {
				t.Fatalf("vault check: %+v %v", crep, err)
			}
		})
	}
}

func TestVerifyAuditHonestCounts(t *testing.T) {
	_, v := keyedVault(t, testKey(7))
	rep, err := v.VerifyAudit(context.Background())
	if err != nil || !rep.OK || rep.Entries != 8 || rep.Anchored != 8 || rep.Unanchored != 0 || rep.AnchoredFrom != 1 ||
		rep.Checkpoints != 2 || rep.Head.ID != 8 || len(rep.Head.MAC) != 64 || rep.Vault != "t" || rep.Kind != wire.AuditVerifyKind {
		t.Fatalf("%+v %v", rep, err)
	}
}

// A vault written before the installation had a key: its rows are
// unanchored, the rows written once it has one are anchored; a process
// that writes without the key after that leaves rows reported missing
// their MACs.
func TestVerifyAuditUnanchoredRows(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t) // no key
	write(t, v, "/a", "1")
	v.Close()
	v, err := NewStore(s.Dir, Options{Actor: "test", AuditKey: testKey(1)}).Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	write(t, v, "/b", "2")
	if _, err := v.SaveCheckpoint(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
	rep, err := v.VerifyAudit(ctx)
	if err != nil || !rep.OK || rep.Unanchored != 2 || rep.Anchored != 2 || rep.AnchoredFrom != 3 || rep.MAC != wire.AuditMACChecked || rep.Checkpoints != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	nokey, err := s.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer nokey.Close()
	write(t, nokey, "/c", "3")
	rep, _ = v.VerifyAudit(ctx)
	if rep.OK || reasons(rep)[wire.AuditMACMissing] != 1 {
		t.Fatalf("a row written without the key after the chain was anchored: %+v", rep)
	}
}

// schemaV3 turns the vault file at path into one of schema version 3, as
// avfs wrote them before writers staged chunks.
func schemaV3(t *testing.T, path string) {
	schemaV4(t, path)
	sqliteExec(t, path, "DROP TABLE staged", "PRAGMA user_version = 3")
}

// schemaV4 turns the vault file at path into one of schema version 4, as
// avfs wrote them before decisions were recorded.
func schemaV4(t *testing.T, path string) {
	sqliteExec(t, path, "DROP TABLE decisions", "ALTER TABLE state DROP COLUMN decisions_max",
		"ALTER TABLE state DROP COLUMN decisions_max_age_s", "PRAGMA user_version = 4")
}

// schemaV2 turns the vault file at path into one of schema version 2, as
// avfs wrote them before history had retention.
func schemaV2(t *testing.T, path string) {
	schemaV3(t, path)
	var drops []string
	for _, c := range []string{"chunk_bytes", "retain_at", "keep_versions", "keep_age_s", "history_pct", "history_min_mb"} {
		drops = append(drops, "ALTER TABLE state DROP COLUMN "+c)
	}
	sqliteExec(t, path, append(drops, "PRAGMA user_version = 2")...)
}

// schemaV1 turns the vault file at path into one of schema version 1, as
// avfs wrote them before the audit chain was keyed.
func schemaV1(t *testing.T, path string) {
	schemaV2(t, path)
	sqliteExec(t, path, "ALTER TABLE audit DROP COLUMN mac", "ALTER TABLE checkpoints DROP COLUMN audit_id",
		"ALTER TABLE checkpoints DROP COLUMN audit_hash", "ALTER TABLE checkpoints DROP COLUMN audit_mac", "PRAGMA user_version = 1")
}

func TestOpenMigratesSchemaV1(t *testing.T) {
	ctx := context.Background()
	s, v := newVault(t)
	write(t, v, "/a", "1")
	if _, err := v.SaveCheckpoint(ctx, "old", ""); err != nil {
		t.Fatal(err)
	}
	v.Close()
	schemaV1(t, s.PathOf("t"))

	v, err := NewStore(s.Dir, Options{Actor: "test", AuditKey: testKey(3)}).Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var ver int
	if err := v.rdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&ver); err != nil || ver != schemaVersion {
		t.Fatalf("schema version %d %v", ver, err)
	}
	if got := read(t, v, "/a"); got != "1" {
		t.Fatalf("/a = %q", got)
	}
	write(t, v, "/b", "2")
	if _, err := v.SaveCheckpoint(ctx, "new", ""); err != nil {
		t.Fatal(err)
	}
	rep, err := v.VerifyAudit(ctx)
	if err != nil || !rep.OK || rep.Unanchored != 3 || rep.AnchoredFrom != 4 || rep.Checkpoints != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	mustCheck(t, v)
	if _, err := v.RestoreCheckpoint(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	// A second open finds the version current and migrates nothing.
	v2, err := NewStore(s.Dir, Options{Actor: "test"}).Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	v2.Close()
}

// A file of schema version 1 that is no vault is not written to.
func TestMigrateRefusesForeignDatabase(t *testing.T) {
	s := NewStore(t.TempDir(), Options{Actor: "test"})
	if err := s.ensureDir(); err != nil {
		t.Fatal(err)
	}
	path := s.PathOf("x")
	sqliteExec(t, path, "CREATE TABLE state (id INTEGER)", "CREATE TABLE audit (id INTEGER)", fmt.Sprintf("PRAGMA user_version = %d", 1))
	_, err := s.Open(context.Background(), "x")
	wantUnreadable(t, "open", err, wire.VaultNotAVFS)
}
