package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"avfs/wire"
)

// exportLines decodes an export, one wire type a line (new gives one).
func exportLines[T any](t *testing.T, b []byte) []T {
	t.Helper()
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		out = append(out, v)
	}
	return out
}

func TestAuditExportCLI(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "w")
	a.write("1", "--vault", "w", "/a.txt")
	a.ok("checkpoint", "save", "--vault", "w", "c1")
	a.ok("vault", "create", "x")

	// One vault to stdout, as stored: the rows of `avfs audit`.
	r := a.exec(nil, "audit", "export", "--format", "jsonl", "--vault", "w")
	if r.code != 0 {
		t.Fatalf("export: exit %d %s", r.code, r.stderr)
	}
	rows := exportLines[wire.AuditEvent](t, r.stdout)
	var list struct {
		Entries []struct {
			ID int64  `json:"id"`
			Op string `json:"op"`
		} `json:"entries"`
	}
	a.into(&list, "audit", "--vault", "w")
	if len(rows) != len(list.Entries) || len(rows) < 3 {
		t.Fatalf("exported %d rows, the log has %d", len(rows), len(list.Entries))
	}
	for i, e := range rows {
		if e.Vault != "w" || e.ID != list.Entries[i].ID || e.Op != list.Entries[i].Op || len(e.Hash) != 64 || len(e.MAC) != 64 {
			t.Fatalf("row %d: %+v", i, e)
		}
	}

	// Every vault, as OCSF, into a file: a summary is printed.
	out := filepath.Join(t.TempDir(), "audit.ocsf.jsonl")
	doc := a.ok("audit", "export", "--format", "ocsf", "--all", "--out", out)
	if doc["kind"] != wire.AuditExportKind || doc["format"] != "ocsf" || doc["out"] != out {
		t.Fatalf("summary %v", doc)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	events := exportLines[wire.OCSFEvent](t, b)
	if vs, _ := doc["vaults"].([]any); len(vs) != 2 || vs[0] != "w" || vs[1] != "x" || doc["events"] != float64(len(events)) || len(events) != len(rows)+1 {
		t.Fatalf("summary %v, %d events", doc, len(events))
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("export file %v %v", fi.Mode(), err)
	}
	for _, e := range events {
		if e.Metadata.Product.Name != "avfs" || e.Metadata.Version != wire.OCSFSchemaVersion || e.TypeUID != int(e.ClassUID)*100+int(e.ActivityID) {
			t.Fatalf("event %+v", e)
		}
	}

	// --since in the future: nothing.
	if r := a.exec(nil, "audit", "export", "--format", "jsonl", "--vault", "w", "--since", "2999-01-01T00:00:00Z"); r.code != 0 || len(r.stdout) != 0 {
		t.Fatalf("since the future: exit %d %q", r.code, r.stdout)
	}

	// Usage errors write nothing; a vault that does not exist is not made.
	for _, args := range [][]string{
		{"audit", "export", "--format", "csv", "--vault", "w"},
		{"audit", "export", "--format", "jsonl", "--vault", "w", "--all"},
		{"audit", "export", "--format", "jsonl", "--vault", "nope"},
	} {
		r := a.json(nil, args...)
		if r.code == 0 || r.doc["error"] == nil {
			t.Fatalf("%q: exit %d %s", args, r.code, r.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(a.home, "vaults", "nope.avfs")); !os.IsNotExist(err) {
		t.Fatalf("export made a vault: %v", err)
	}
}
