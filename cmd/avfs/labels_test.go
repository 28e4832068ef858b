package main

import (
	"strings"
	"testing"

	"avfs/wire"
)

// tag and meta set, list and remove labels; find -tag and -meta select
// by them.
func TestLabels(t *testing.T) {
	a := newAVFS(t)
	a.write("a", "/a.txt")
	a.write("b", "/b.txt")
	var l wire.Labels
	a.into(&l, "tag", "/a.txt", "reviewed", "raw")
	if strings.Join(l.Tags, ",") != "raw,reviewed" {
		t.Fatalf("tags %+v", l)
	}
	a.into(&l, "meta", "/a.txt", "owner=ops", "note=a=b")
	if l.Meta["owner"] != "ops" || l.Meta["note"] != "a=b" {
		t.Fatalf("meta %+v", l)
	}
	a.ok("tag", "/b.txt", "raw")
	if r := a.exec(nil, "tag", "/a.txt"); r.code != 0 || string(r.stdout) != "raw\nreviewed\n" {
		t.Fatalf("tag list: %q %q", r.stdout, r.stderr)
	}
	if r := a.exec(nil, "meta", "/a.txt"); r.code != 0 || string(r.stdout) != "note=a=b\nowner=ops\n" {
		t.Fatalf("meta list: %q %q", r.stdout, r.stderr)
	}
	find := func(args ...string) string {
		var res wire.FindResult
		a.into(&res, append([]string{"find", "-type", "f"}, args...)...)
		var ps []string
		for _, m := range res.Matches {
			ps = append(ps, m.Path)
		}
		return strings.Join(ps, ",")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tag", "raw"}, "/a.txt,/b.txt"},
		{[]string{"-tag", "raw", "-tag", "reviewed"}, "/a.txt"},
		{[]string{"-meta", "owner"}, "/a.txt"},
		{[]string{"-meta", "owner=ops"}, "/a.txt"},
		{[]string{"-meta", "owner=dev"}, ""},
	} {
		if got := find(tc.args...); got != tc.want {
			t.Errorf("find %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	a.ok("tag", "--remove", "/a.txt", "raw")
	var after wire.Labels
	a.into(&after, "meta", "--remove", "/a.txt", "owner")
	if strings.Join(after.Tags, ",") != "reviewed" || len(after.Meta) != 1 {
		t.Fatalf("after removing: %+v", after)
	}
	if r := a.exec(nil, "meta", "/a.txt", "novalue"); r.code == 0 {
		t.Fatalf("meta without = was accepted")
	}
	if r := a.exec(nil, "tag", "--remove", "/a.txt"); r.code == 0 {
		t.Fatalf("tag --remove without tags was accepted")
	}
}
