package vault

import (
	"context"
	"testing"
)

func TestMarkListsChangesAndReleases(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/keep", "1")
	write(t, v, "/edit", "1")
	m, err := v.Mark(ctx, "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	write(t, v, "/edit", "22")
	write(t, v, "/new", "3")
	if _, err := v.Remove(ctx, "/keep", false); err != nil {
		t.Fatal(err)
	}
	ch, err := v.ChangesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range ch {
		got[c.Path] = c.Op
	}
	if len(got) != 3 || got["/edit"] != "modified" || got["/new"] != "added" || got["/keep"] != "deleted" {
		t.Fatalf("changes %v", got)
	}
	if err := v.Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ChangesSince(ctx, m); err == nil {
		t.Fatal("released mark still answers")
	}
	var closed int
	v.db.QueryRow("SELECT COUNT(*) FROM inodes WHERE gen_to < 9223372036854775807").Scan(&closed)
	if closed != 0 {
		t.Fatalf("%d old rows kept after release", closed)
	}
	mustCheck(t, v)
}

func TestReleaseMarksDropsLeftOverMarks(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/edit", "1")
	// Two runs whose avfs was killed left their marks.
	for _, p := range []string{"ex-1", "ex-2"} {
		if _, err := v.Mark(ctx, p); err != nil {
			t.Fatal(err)
		}
		write(t, v, "/edit", p)
	}
	n, err := v.ReleaseMarks(ctx)
	if err != nil || n != 2 {
		t.Fatalf("ReleaseMarks: %d, %v", n, err)
	}
	var closed, marks int
	v.db.QueryRow("SELECT COUNT(*) FROM inodes WHERE gen_to < 9223372036854775807").Scan(&closed)
	v.db.QueryRow("SELECT COUNT(*) FROM marks").Scan(&marks)
	if closed != 0 || marks != 0 {
		t.Fatalf("%d old rows and %d marks kept", closed, marks)
	}
	if n, err := v.ReleaseMarks(ctx); err != nil || n != 0 {
		t.Fatalf("again: %d, %v", n, err)
	}
	mustCheck(t, v)
}
