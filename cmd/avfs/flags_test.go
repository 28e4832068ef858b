package main

import (
	"regexp"
	"strings"
	"testing"
)

// ls -a shows dot names, -h human sizes, combined as -lah; tree -L limits
// the depth; log -n keeps the newest versions; times carry a zone.
func TestListingFlags(t *testing.T) {
	a := newAVFS(t)
	a.ok("mkdir", "/d")
	a.ok("mkdir", "/d/e")
	a.write(strings.Repeat("x", 3000), "/d/e/deep.txt")
	a.write("h", "/.hidden")
	a.write("v", "/d/f.txt")

	plain := a.exec(nil, "ls", "/")
	if got := strings.Fields(string(plain.stdout)); len(got) != 1 || got[0] != "d" {
		t.Errorf("ls /: %q, want [d] (dot names hidden)", got)
	}
	zone := regexp.MustCompile(`\d\d:\d\d:\d\d [+-]\d{4}`)
	for _, args := range [][]string{{"ls", "-la", "/"}, {"ls", "-l", "-a", "/"}, {"ls", "--long", "--all", "/"}} {
		r := a.exec(nil, args...)
		out := string(r.stdout)
		if r.code != 0 || !strings.Contains(out, ".hidden") || !zone.MatchString(out) {
			t.Errorf("%q: exit %d:\n%s%s", args, r.code, out, r.stderr)
		}
	}
	for _, args := range [][]string{{"ls", "-lah", "/d/e"}, {"ls", "-l", "-a", "-h", "/d/e"}, {"ls", "-h", "-l", "/d/e"}} {
		r := a.exec(nil, args...)
		if r.code != 0 || !strings.Contains(string(r.stdout), "2.9 KiB") {
			t.Errorf("%q: exit %d:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := a.exec(nil, "ls", "-l", "/d/e"); !strings.Contains(string(r.stdout), "3000") {
		t.Errorf("ls -l without -h: %s", r.stdout)
	}
	var l1 struct {
		Entries []struct{ Path string } `json:"entries"`
	}
	a.into(&l1, "tree", "-L", "1", "/")
	var paths []string
	for _, en := range l1.Entries {
		paths = append(paths, en.Path)
	}
	equalSlice(t, "tree -L 1", paths, []string{"/", "/.hidden", "/d"})
	r := a.exec(nil, "tree", "-L", "1", "/d")
	if out := string(r.stdout); !strings.Contains(out, "e/") || strings.Contains(out, "deep.txt") {
		t.Errorf("tree -L 1 /d:\n%s", out)
	}
	if r := a.exec(nil, "tree", "/"); !strings.Contains(string(r.stdout), "deep.txt") {
		t.Errorf("tree without -L:\n%s", r.stdout)
	}

	for i := 0; i < 4; i++ {
		a.write(strings.Repeat("v", i+2), "/d/f.txt")
	}
	var lg struct {
		Versions []struct {
			N int64 `json:"version"`
		} `json:"versions"`
	}
	a.into(&lg, "log", "-n", "2", "/d/f.txt")
	if len(lg.Versions) != 2 || min(lg.Versions[0].N, lg.Versions[1].N) != 4 {
		t.Errorf("log -n 2: %+v, want versions 4 and 5", lg.Versions)
	}
	a.fail(2, "usage", "log", "-n", "-1", "/d/f.txt")
	if r := a.exec(nil, "log", "/d/f.txt"); !zone.Match(r.stdout) {
		t.Errorf("log times without a zone:\n%s", r.stdout)
	}
}

// quota set takes KEY VALUE pairs beside the flags.
func TestQuotaSetPairs(t *testing.T) {
	a := newAVFS(t)
	a.ok("quota", "set", "max_files", "7", "max-size-mb", "3")
	i := a.info()
	equal(t, "max files", i.Quota.MaxFiles, int64(7))
	equal(t, "max size", i.Quota.MaxSizeMB, int64(3))
	a.fail(2, "usage", "quota", "set", "max_files")
	a.fail(2, "usage", "quota", "set", "colour", "blue")
	a.fail(2, "usage", "quota", "set", "max_files", "many")
}

// vault delete asks on a terminal; without one it refuses unless --yes.
func TestVaultDeleteNeedsYes(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "scratch")
	eo := a.fail(2, "usage", "vault", "delete", "scratch")
	if msg, _ := eo["message"].(string); !strings.Contains(msg, "--yes") {
		t.Errorf("refusal does not name --yes: %v", eo)
	}
	if r := a.exec([]byte("y\n"), "vault", "delete", "scratch"); r.code != 2 {
		t.Errorf("a y on a pipe deleted the vault: exit %d", r.code)
	}
	a.ok("vault", "info", "--vault", "scratch")
	a.ok("vault", "delete", "-y", "scratch")
	a.fail(1, "vault_not_found", "vault", "info", "--vault", "scratch")
}

// snapshot is checkpoint.
func TestSnapshotAlias(t *testing.T) {
	a := newAVFS(t)
	a.ok("snapshot", "save", "s1")
	var cps []struct{ Name string }
	var doc struct {
		Checkpoints *[]struct{ Name string } `json:"checkpoints"`
	}
	doc.Checkpoints = &cps
	a.into(&doc, "checkpoint", "list")
	if len(cps) != 1 || cps[0].Name != "s1" {
		t.Errorf("checkpoint list after snapshot save: %+v", cps)
	}
}
