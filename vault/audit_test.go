package vault

import (
	"context"
	"database/sql"
	"testing"

	"avfs/wire"
)

func TestAuditChainDetectsTampering(t *testing.T) {
	ctx := context.Background()
	for _, tamper := range []string{
		"UPDATE audit SET path = '/other' WHERE id = 2",
		"DELETE FROM audit WHERE id = 2",
		"UPDATE audit SET actor = 'mallory' WHERE id = (SELECT MAX(id) FROM audit)",
	} {
		t.Run(tamper, func(t *testing.T) {
			_, v := newVault(t)
			write(t, v, "/a", "1")
			write(t, v, "/b", "2")
			if _, err := v.SaveCheckpoint(ctx, "c", ""); err != nil {
				t.Fatal(err)
			}
			rep, err := v.VerifyAudit(ctx)
			if err != nil || !rep.OK || rep.Entries != 4 {
				t.Fatalf("clean log: %+v %v", rep, err)
			}
			entries, _ := v.Audit(ctx, AuditQuery{Limit: 2})
			if len(entries) != 2 || entries[1].Op != "checkpoint.save" || entries[1].Actor != "test" {
				t.Fatalf("audit entries %+v", entries)
			}
			db, err := sql.Open("sqlite3", v.Path())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(tamper); err != nil {
				t.Fatal(err)
			}
			db.Close()
			rep, err = v.VerifyAudit(ctx)
			if err != nil || rep.OK || !wire.HasCode(rep.Err(), wire.CodeIntegrity) {
				t.Fatalf("tampered log passes: %+v %v", rep, err)
			}
			if crep, _ := v.Check(ctx); crep.OK {
				t.Fatal("vault check passes a tampered audit log")
			}
		})
	}
}

func TestAuditDetectsRemovedTail(t *testing.T) {
	_, v := newVault(t)
	write(t, v, "/a", "1")
	write(t, v, "/b", "2")
	db, err := sql.Open("sqlite3", v.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM audit WHERE id = (SELECT MAX(id) FROM audit)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if rep, _ := v.VerifyAudit(context.Background()); rep.OK {
		t.Fatal("a log with its last row removed passes")
	}
}
