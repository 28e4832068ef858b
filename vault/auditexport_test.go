package vault

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

// exportProduct is the product of the test exports.
var exportProduct = wire.OCSFProduct{Name: "avfs", VendorName: "avfs", Version: "v0.0.0-test"}

// exportVault makes a small vault with a key, whose audit log is
//
//	1 vault.create, 2 mkdir /src, 3 write /src/a.txt, 4 exec (denied),
//	5 checkpoint.save, 6 exec (ran, exit 0), 7 move /src/a.txt,
//	8 quota.set, 9 custom.unknown (an op no mapping lists)
//
// and rewrites its times to one a second from 2026-12-01T12:00:00Z,
// re-chaining the log under the key so that it is the same on every run.
func exportVault(t *testing.T) (*Vault, []byte) {
	t.Helper()
	ctx := context.Background()
	key := testKey(7)
	s := NewStore(t.TempDir(), Options{Actor: "test", AuditKey: key})
	v, err := s.Create(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	if _, err := v.Mkdir(ctx, "/src", 0o755, false); err != nil {
		t.Fatal(err)
	}
	write(t, v, "/src/a.txt", "hello")
	steps := []func() error{
		func() error {
			return v.Event(ctx, "exec", "/src", map[string]any{"id": "ex-1", "decision_id": "11111111-2222-4333-8444-555555555555",
				"decision": wire.Deny, "argv": []string{"cat", "/etc/shadow"}, "shell": "", "reasons": []string{"fs.read.secret"}})
		},
		func() error { _, err := v.SaveCheckpoint(ctx, "before", ""); return err },
		func() error {
			return v.Event(ctx, "exec", "/src", map[string]any{"id": "ex-2", "decision_id": "66666666-7777-4888-9999-aaaaaaaaaaaa",
				"decision": wire.AllowWithCheckpoint, "argv": nil, "shell": "make <all> && echo done", "reasons": []string{"fs.write"},
				"exit_code": 0, "timed_out": false, "changes": 1})
		},
		func() error { _, err := v.Move(ctx, "/src/a.txt", "/src/b.txt"); return err },
		func() error { n := int64(10); _, err := v.SetQuota(ctx, QuotaChange{MaxFiles: &n}); return err },
		func() error { return v.Event(ctx, "custom.unknown", "", nil) },
	}
	for _, f := range steps {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rechain(t, v.Path(), newMACs, key, func(rows []auditTestRow) []auditTestRow {
		for i := range rows {
			rows[i].ns = at.Add(time.Duration(i) * time.Second).UnixNano()
		}
		return rows
	})
	return v, key
}

// checkExportGolden compares an export with the golden file name in the
// wire package's testdata (rewritten with -update).
func checkExportGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("..", "wire", "testdata", "golden", name)
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./vault -run Golden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed: fields may be added, never renamed or removed.\n got %s\nwant %s", name, got, want)
	}
}

// The export of a small vault, in both formats, is pinned; the jsonl rows
// carry what it takes to recompute the chain and its MACs.
func TestGoldenAuditExport(t *testing.T) {
	ctx := context.Background()
	v, key := exportVault(t)
	for _, f := range wire.AuditExportFormats {
		var b bytes.Buffer
		n, err := v.ExportAudit(ctx, &b, AuditExportOptions{Format: f, Product: exportProduct, Hostname: "build-7"})
		if err != nil || n != 9 {
			t.Fatalf("%s: %d lines, %v", f, n, err)
		}
		if lines := strings.Count(b.String(), "\n"); lines != 9 {
			t.Fatalf("%s: %d lines written", f, lines)
		}
		checkExportGolden(t, "audit_export_"+string(f)+".jsonl", b.Bytes())
	}
	// Each jsonl row verifies as the vault does: its hash from its
	// fields, chained to the previous row, anchored by the key's MAC.
	var b bytes.Buffer
	if _, err := v.ExportAudit(ctx, &b, AuditExportOptions{Format: wire.AuditExportJSONL}); err != nil {
		t.Fatal(err)
	}
	prev := make([]byte, 32)
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		var e wire.AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		h := auditHash(prev, e.ID, e.TimeNS, e.Op, e.Path, string(e.Details), e.Actor)
		if hex.EncodeToString(h) != e.Hash || e.PrevHash != hex.EncodeToString(prev) || e.MAC != hex.EncodeToString(auditMAC(key, h)) {
			t.Fatalf("row %d does not verify from its export: %s", e.ID, sc.Bytes())
		}
		if e.Op == "exec" && e.DecisionID == "" {
			t.Fatalf("exec row %d without its decision_id", e.ID)
		}
		prev = h
	}
}

// Each op maps to its OCSF class and activity by ocsfOps; one it does
// not list is still exported, as a Base Event.
func TestOCSFMapping(t *testing.T) {
	for _, tc := range []struct {
		op       string
		details  string
		class    wire.OCSFClass
		activity wire.OCSFActivity
		typeUID  int
		severity wire.OCSFSeverity
		status   wire.OCSFStatus
		fileType int
		exit     *int
		cmdLine  string
	}{
		{op: "exec", details: `{"id":"ex-1","decision":"deny","argv":["rm","-rf","/"],"shell":""}`, class: 1007, activity: 1, typeUID: 100701,
			severity: wire.OCSFSeverityMedium, status: wire.OCSFStatusFailure, cmdLine: "rm -rf /"},
		{op: "exec", details: `{"id":"ex-2","decision":"require_approval","shell":"make deploy"}`, class: 1007, activity: 1, typeUID: 100701,
			severity: wire.OCSFSeverityLow, status: wire.OCSFStatusSuccess, cmdLine: "make deploy"},
		{op: "exec", details: `{"id":"ex-3","decision":"allow","argv":["false"],"exit_code":1}`, class: 1007, activity: 2, typeUID: 100702,
			severity: wire.OCSFSeverityInformational, status: wire.OCSFStatusFailure, exit: intPtr(1), cmdLine: "false"},
		{op: "exec", details: `{"id":"ex-4","decision":"allow","argv":["true"],"exit_code":0}`, class: 1007, activity: 2, typeUID: 100702,
			severity: wire.OCSFSeverityInformational, status: wire.OCSFStatusSuccess, exit: intPtr(0), cmdLine: "true"},
		{op: "exec", details: `{"id":"ex-5","decision":"deny","error":"parse"}`, class: 1007, activity: 1, typeUID: 100701,
			severity: wire.OCSFSeverityMedium, status: wire.OCSFStatusFailure},
		{op: "write", details: `{"size":3}`, class: 1001, activity: 3, typeUID: 100103, severity: 1, status: 1, fileType: 1},
		{op: "create", details: `{"mode":420}`, class: 1001, activity: 1, typeUID: 100101, severity: 1, status: 1, fileType: 1},
		{op: "mkdir", details: `{}`, class: 1001, activity: 1, typeUID: 100101, severity: 1, status: 1, fileType: 2},
		{op: "symlink", details: `{"target":"x"}`, class: 1001, activity: 1, typeUID: 100101, severity: 1, status: 1, fileType: 7},
		{op: "remove", details: `{}`, class: 1001, activity: 4, typeUID: 100104, severity: 1, status: 1},
		{op: "rmdir", details: `{}`, class: 1001, activity: 4, typeUID: 100104, severity: 1, status: 1, fileType: 2},
		{op: "move", details: `{"to":"/b"}`, class: 1001, activity: 5, typeUID: 100105, severity: 1, status: 1},
		{op: "chmod", details: `{"mode":493}`, class: 1001, activity: 6, typeUID: 100106, severity: 1, status: 1},
		{op: "checkpoint.save", details: `{"id":1,"name":"c"}`, class: 1001, activity: 99, typeUID: 100199, severity: 1, status: 1, fileType: 2},
		{op: "checkpoint.restore", details: `{"id":1}`, class: 1001, activity: 99, typeUID: 100199, severity: 1, status: 1, fileType: 2},
		{op: "approval.request", details: `{"id":"ap-1"}`, class: 0, activity: 99, typeUID: 99, severity: 1, status: 1},
		{op: "lock", details: `{}`, class: 0, activity: 99, typeUID: 99, severity: 1, status: 1},
		{op: "some.future.op", details: `not json`, class: 0, activity: 99, typeUID: 99, severity: 1, status: 1},
	} {
		t.Run(tc.op, func(t *testing.T) {
			r := storedAuditRow{id: 3, timeNS: 1_764_590_400_123_456_789, op: tc.op, path: "/src/x", details: tc.details, actor: "cli:alice",
				prevHash: make([]byte, 32), hash: bytes.Repeat([]byte{0xab}, 32)}
			_ = json.Unmarshal([]byte(tc.details), &r.fields)
			e := r.ocsf("work", AuditExportOptions{Product: exportProduct})
			if e.ClassUID != tc.class || e.ActivityID != tc.activity || e.TypeUID != tc.typeUID || e.SeverityID != tc.severity || e.StatusID != tc.status {
				t.Fatalf("class %d activity %d type %d severity %d status %d", e.ClassUID, e.ActivityID, e.TypeUID, e.SeverityID, e.StatusID)
			}
			wantCategory := wire.OCSFSystemActivity
			if tc.class == wire.OCSFBaseEvent {
				wantCategory = wire.OCSFUncategorized
			}
			if e.CategoryUID != wantCategory || e.ClassName == "" || e.ActivityName == "" || e.Severity == "" || e.Status == "" {
				t.Fatalf("category %d names %q %q %q %q", e.CategoryUID, e.ClassName, e.ActivityName, e.Severity, e.Status)
			}
			if e.Time != 1_764_590_400_123 || e.Metadata.UID != hex.EncodeToString(r.hash) || e.Metadata.Version != wire.OCSFSchemaVersion ||
				e.Metadata.Product != exportProduct || e.Actor.User.Name != "cli:alice" || e.Unmapped.Op != tc.op || e.Unmapped.Vault != "work" {
				t.Fatalf("event %+v", e)
			}
			if (tc.class == wire.OCSFFileSystemActivity) != (e.File != nil) || (tc.class == wire.OCSFProcessActivity) != (e.Process != nil) {
				t.Fatalf("file %+v process %+v", e.File, e.Process)
			}
			if e.File != nil && (e.File.Path != "/src/x" || e.File.Name != "x" || e.File.TypeID != tc.fileType) {
				t.Fatalf("file %+v", e.File)
			}
			if e.Process != nil && e.Process.CmdLine != tc.cmdLine {
				t.Fatalf("process %+v", e.Process)
			}
			if (e.ExitCode == nil) != (tc.exit == nil) || (e.ExitCode != nil && *e.ExitCode != *tc.exit) {
				t.Fatalf("exit code %v, want %v", e.ExitCode, tc.exit)
			}
			if !json.Valid(e.Unmapped.Details) {
				t.Fatalf("details %s", e.Unmapped.Details)
			}
		})
	}
}

func intPtr(n int) *int { return &n }

// --since keeps the rows at or after the time; an unknown format writes
// nothing.
func TestExportAuditSince(t *testing.T) {
	ctx := context.Background()
	v, _ := exportVault(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		since time.Time
		first int64
		n     int64
	}{
		{time.Time{}, 1, 9},
		{at, 1, 9},
		{at.Add(6 * time.Second), 7, 3},
		{at.Add(6*time.Second + 1), 8, 2},
		{at.Add(time.Hour), 0, 0},
		{time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), 0, 0}, // past what Unix nanoseconds hold
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), 1, 9},
	} {
		var b bytes.Buffer
		n, err := v.ExportAudit(ctx, &b, AuditExportOptions{Format: wire.AuditExportJSONL, Since: tc.since})
		if err != nil || n != tc.n {
			t.Fatalf("since %s: %d rows, %v", tc.since, n, err)
		}
		if n == 0 {
			if b.Len() != 0 {
				t.Fatalf("since %s: %q", tc.since, b.String())
			}
			continue
		}
		var first wire.AuditEvent
		if err := json.NewDecoder(&b).Decode(&first); err != nil || first.ID != tc.first {
			t.Fatalf("since %s: first row %d, want %d (%v)", tc.since, first.ID, tc.first, err)
		}
	}
	var b bytes.Buffer
	if _, err := v.ExportAudit(ctx, &b, AuditExportOptions{Format: "csv"}); !wire.HasCode(err, wire.CodeUsage) || b.Len() != 0 {
		t.Fatalf("format csv: %v, wrote %q", err, b.String())
	}
}

// The export never writes to the vault: its files are the same bytes
// before and after, and the log still verifies.
func TestExportAuditWritesNothing(t *testing.T) {
	ctx := context.Background()
	v, _ := exportVault(t)
	files := func() map[string][]byte {
		out := map[string][]byte{}
		for _, suffix := range []string{"", "-wal"} {
			b, err := os.ReadFile(v.Path() + suffix)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			out[suffix] = b
		}
		return out
	}
	before := files()
	for _, f := range wire.AuditExportFormats {
		if _, err := v.ExportAudit(ctx, &bytes.Buffer{}, AuditExportOptions{Format: f}); err != nil {
			t.Fatal(err)
		}
	}
	after := files()
	for k := range before {
		if !bytes.Equal(before[k], after[k]) {
			t.Fatalf("the vault's file %q changed during the export", "vault"+k)
		}
	}
}
