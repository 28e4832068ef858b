package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestGoldenAuditVerify(t *testing.T) {
	ok := AuditVerify{Kind: AuditVerifyKind, Vault: "work", OK: true, Entries: 42, MAC: AuditMACChecked, Anchored: 30, Unanchored: 12, AnchoredFrom: 13,
		Checkpoints: 4, Head: AuditHead{ID: 42, Hash: "5d1c0b2e8a7f4c3e9b6a1d0f2e4c6b8a9d7e5f3c1b2a4d6e8f0a1c3e5b7d9f2a",
			MAC: "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"}, Problems: []AuditProblem{}}
	checkGolden(t, "audit_verify", ok)
	failed := ok
	failed.OK, failed.ProblemsTotal = false, 2
	failed.Problems = []AuditProblem{
		{Reason: AuditMACMismatch, Row: 40, Message: "the row's MAC does not match the audit key (written, edited or re-chained without the key)"},
		{Reason: AuditCheckpointHeadMismatch, Row: 38, Checkpoint: 4, Message: "checkpoint 4 recorded row 38 as the chain's head with another hash or MAC (the history up to it was rewritten)"},
	}
	checkGolden(t, "audit_verify_failed", ErrorDocument{Error: ErrorObject(failed.Err())})
	if ok.Err() != nil {
		t.Fatal("a passing report is an error")
	}
	for _, f := range AuditFaults {
		if f == "" {
			t.Fatal("empty fault")
		}
	}
}

// TestGoldenAuditExport pins the summary of `avfs --json audit export
// --out FILE`, and checks that every line of the pinned exports (written
// by the vault package's TestGoldenAuditExport) is exactly a wire type.
func TestGoldenAuditExport(t *testing.T) {
	checkGolden(t, "audit_export", AuditExport{Kind: AuditExportKind, Format: AuditExportOCSF, Out: "/var/log/avfs/audit.ocsf.jsonl",
		Vaults: []string{"default", "work"}, Events: 1234})
	for _, tc := range []struct {
		format AuditExportFormat
		into   func() any
	}{
		{AuditExportJSONL, func() any { return &AuditEvent{} }},
		{AuditExportOCSF, func() any { return &OCSFEvent{} }},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "golden", "audit_export_"+string(tc.format)+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		if len(lines) < 2 {
			t.Fatalf("%s: %d lines", tc.format, len(lines))
		}
		for i, line := range lines {
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(tc.into()); err != nil {
				t.Fatalf("%s line %d: %v", tc.format, i+1, err)
			}
		}
	}
}
