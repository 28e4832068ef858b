package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

// POST /v1/restore returns the vault to a checkpoint and answers what
// `avfs --json checkpoint restore` prints; what cannot be restored is an
// error document with its code's status.
func TestRestore(t *testing.T) {
	ts := startServer(t, nil, "")
	ts.create("work")
	ctx := context.Background()
	v, err := vault.NewStore(ts.home, vault.Options{}).Open(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.WriteFile(ctx, "/a.txt", strings.NewReader("before\n"), vault.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	cp, err := v.SaveCheckpoint(ctx, "cp", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.WriteFile(ctx, "/b.txt", strings.NewReader("after\n"), vault.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	v.Close()

	code, _, body := ts.call("/v1/restore", wire.RestoreRequest{Vault: "work", Checkpoint: strconv.FormatInt(cp.ID, 10)})
	if code != http.StatusOK {
		t.Fatalf("restore: %d %s", code, body)
	}
	res := into[vault.RestoreResult](t, body)
	if res.Checkpoint.ID != cp.ID || len(res.Changes) != 1 || res.Changes[0].Path != "/b.txt" || res.Changes[0].Op != "deleted" {
		t.Errorf("restore: %+v", res)
	}
	v, _ = vault.NewStore(ts.home, vault.Options{}).Open(ctx, "work")
	if _, err := v.Stat(ctx, "/b.txt"); !wire.HasCode(err, wire.CodeNotFound) {
		t.Errorf("b.txt after the restore: %v", err)
	}
	v.Close()

	for _, c := range []struct {
		body any
		code int
	}{
		{wire.RestoreRequest{Vault: "work"}, http.StatusBadRequest},                          // no checkpoint
		{map[string]any{"vault": "work", "checkpoint": "cp", "x": 1}, http.StatusBadRequest}, // unknown field
		{wire.RestoreRequest{Vault: "work", Checkpoint: "nope"}, http.StatusNotFound},
		{wire.RestoreRequest{Vault: "missing", Checkpoint: "cp"}, http.StatusNotFound},
	} {
		if code, _, body := ts.call("/v1/restore", c.body); code != c.code {
			t.Errorf("%+v: %d %s, want %d", c.body, code, body, c.code)
		}
	}
}
