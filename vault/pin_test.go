package vault

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"avfs/wire"
)

// TestCheckpointPinned checks that the checkpoint of a run under way (one
// taken with its mark while LockRun is held) can be deleted by none of
// delete, prune and gc until the run releases its mark, or is gone.
func TestCheckpointPinned(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// end ends the run that holds the pin, however it ends.
		end func(t *testing.T, v *Vault, m Mark)
	}{
		{"released", func(t *testing.T, v *Vault, m Mark) {
			if err := v.Release(ctx, m); err != nil {
				t.Fatal(err)
			}
		}},
		{"killed", func(t *testing.T, v *Vault, m Mark) {
			// The run's avfs died holding the lock and the mark.
			if _, err := v.db.ExecContext(ctx, "UPDATE locks SET pid = ? WHERE name = ?", deadPID(t), LockRun); err != nil {
				t.Fatal(err)
			}
		}},
		{"unlocked", func(t *testing.T, v *Vault, m Mark) {
			// The lock went but not the mark (killed between the two).
			if err := v.Unlock(ctx, LockRun); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, v := newVault(t)
			write(t, v, "/f", "orig")
			old, err := v.SaveCheckpoint(ctx, "old", "")
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Lock(ctx, LockRun, "ex-run"); err != nil {
				t.Fatal(err)
			}
			cp, m, err := v.SaveCheckpointMarked(ctx, "ex-run", "before", "ex-run")
			if err != nil || m.Generation != cp.Generation {
				t.Fatalf("checkpoint %+v mark %+v: %v", cp, m, err)
			}
			write(t, v, "/f", "changed")
			// The mark lists what changed since the checkpoint.
			if ch, err := v.ChangesSince(ctx, m); err != nil || len(ch) != 1 || ch[0].Path != "/f" {
				t.Fatalf("changes %+v %v", ch, err)
			}
			id := strconv.FormatInt(cp.ID, 10)
			_, err = v.DeleteCheckpoint(ctx, id)
			var we *wire.Error
			if !wire.HasCode(err, wire.CodeCheckpointPinned) || !asError(err, &we) || we.Details["exec_id"] != "ex-run" || we.Details["checkpoint"] != cp.ID {
				t.Fatalf("delete of a pinned checkpoint: %v", err)
			}
			deleted, pinned, err := v.PruneCheckpoints(ctx, 0, tzero)
			if err != nil || len(deleted) != 1 || deleted[0].ID != old.ID || len(pinned) != 1 || pinned[0].ID != cp.ID {
				t.Fatalf("prune --keep 0: deleted %+v pinned %+v: %v", deleted, pinned, err)
			}
			gc, err := v.GC(ctx)
			if err != nil || gc.MarksReleased != 0 {
				t.Fatalf("gc: %+v %v", gc, err)
			}
			// Still restorable, with what only it kept.
			if _, err := v.RestoreCheckpoint(ctx, id); err != nil {
				t.Fatal(err)
			}
			if got := read(t, v, "/f"); got != "orig" {
				t.Fatalf("restored %q", got)
			}
			c.end(t, v, m)
			if _, err := v.DeleteCheckpoint(ctx, id); err != nil {
				t.Fatalf("delete once the run ended: %v", err)
			}
			var marks int
			if err := v.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM marks").Scan(&marks); err != nil || marks != 0 {
				t.Fatalf("%d marks left: %v", marks, err)
			}
			mustCheck(t, v)
		})
	}
}

// A killed run's mark goes at the next gc, which reports it; one of a run
// under way stays.
func TestGCReleasesDeadMarks(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	if err := v.Lock(ctx, LockRun, "ex-run"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.SaveCheckpointMarked(ctx, "ex-run", "", "ex-run"); err != nil {
		t.Fatal(err)
	}
	if res, err := v.GC(ctx); err != nil || res.MarksReleased != 0 {
		t.Fatalf("gc under a run: %+v %v", res, err)
	}
	if _, err := v.db.ExecContext(ctx, "UPDATE locks SET pid = ? WHERE name = ?", deadPID(t), LockRun); err != nil {
		t.Fatal(err)
	}
	if res, err := v.GC(ctx); err != nil || res.MarksReleased != 1 {
		t.Fatalf("gc after a killed run: %+v %v", res, err)
	}
	if cps, err := v.Checkpoints(ctx); err != nil || len(cps) != 1 {
		t.Fatalf("gc deleted a checkpoint: %+v %v", cps, err)
	}
	mustCheck(t, v)
}

var tzero = time.Time{}

func asError(err error, target **wire.Error) bool { return errors.As(err, target) }
