package vault

import (
	"context"
	"fmt"
	"testing"

	"avfs/wire"
)

// TestLabels: tags and metadata are set and removed in one change, read
// back sorted, refused when malformed (changing nothing), listed as a
// change, and restored with a checkpoint.
func TestLabels(t *testing.T) {
	ctx := context.Background()
	_, v := newVault(t)
	write(t, v, "/f", "x\n")
	if _, err := v.SaveCheckpoint(ctx, "plain", ""); err != nil {
		t.Fatal(err)
	}
	m, _ := v.Mark(ctx, "labels")
	l, err := v.Label(ctx, "/f", LabelEdit{AddTags: []string{"b", "a"}, SetMeta: map[string]string{"owner": "ops", "empty": ""}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(l.Tags) != "[a b]" || l.Meta["owner"] != "ops" || len(l.Meta) != 2 || l.Path != "/f" || l.Kind != wire.LabelsKind {
		t.Fatalf("labels %+v", l)
	}
	for _, bad := range []LabelEdit{
		{AddTags: []string{""}},
		{AddTags: []string{"ok", "nul\x00"}},
		{SetMeta: map[string]string{"k": "\xff"}},
		{RemoveMeta: []string{"\xfe"}},
	} {
		if _, err := v.Label(ctx, "/f", bad); !wire.HasCode(err, wire.CodeInvalidInput) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	l, err = v.Label(ctx, "/f", LabelEdit{RemoveTags: []string{"a", "never"}, RemoveMeta: []string{"empty"}})
	if err != nil || fmt.Sprint(l.Tags) != "[b]" || len(l.Meta) != 1 {
		t.Fatalf("after removing: %+v %v", l, err)
	}
	if got, err := v.Labels(ctx, "/f"); err != nil || fmt.Sprint(got) != fmt.Sprint(l) {
		t.Fatalf("read back %+v %v, want %+v", got, err, l)
	}
	ch, err := v.ChangesSince(ctx, m)
	if err != nil || len(ch) != 1 || ch[0].Op != "modified" {
		t.Fatalf("changes %+v %v", ch, err)
	}
	if _, err := v.RestoreCheckpoint(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	if l, err := v.Labels(ctx, "/f"); err != nil || len(l.Tags)+len(l.Meta) != 0 {
		t.Fatalf("after restore: %+v %v", l, err)
	}
}
