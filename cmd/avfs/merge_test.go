package main

import (
	"strings"
	"testing"

	"avfs/wire"
)

// avfs vault diff and avfs vault merge on the command line: the diff
// lists what the fork changed, a dry run changes nothing, a conflict
// fails with merge_conflict and applies nothing, a per-path choice
// resolves it.
func TestVaultMergeCLI(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "w", "--use")
	a.write("base", "/a.txt")
	a.write("keep", "/k.txt")
	a.ok("vault", "fork", "w", "f")
	a.write("fork", "--vault", "f", "/a.txt")
	a.write("new", "--vault", "f", "/n.txt")

	var d wire.VaultDiff
	a.into(&d, "vault", "diff", "w", "f")
	if d.Kind != wire.VaultDiffKind || len(d.Changes) != 2 || d.Changes[0].Path != "/a.txt" || d.Changes[1].Op != "added" || d.Stat.Added != 1 {
		t.Fatalf("vault diff %+v", d)
	}
	if r := a.exec(nil, "vault", "diff", "w", "f", "--exit-code"); r.code != 1 || string(r.stdout) != "M /a.txt\nA /n.txt\n1 added, 1 modified, 0 deleted\n" {
		t.Fatalf("vault diff --exit-code: %d %q", r.code, r.stdout)
	}

	var dry wire.MergeResult
	a.into(&dry, "vault", "merge", "f", "--dry-run")
	if !dry.DryRun || dry.Applied || len(dry.Changes) != 2 || a.cat("/a.txt") != "base" {
		t.Fatalf("dry run %+v", dry)
	}
	// The parent changes the same file: a conflict.
	a.write("parent", "/a.txt")
	eo := a.fail(1, string(wire.CodeMergeConflict), "vault", "merge", "f")
	if list, _ := eo["conflicts"].([]any); len(list) != 1 || !strings.Contains(eo["message"].(string), "/a.txt") {
		t.Fatalf("error %v", eo)
	}
	if a.cat("/a.txt") != "parent" || a.exec(nil, "cat", "/n.txt").code == 0 {
		t.Fatal("a merge with a conflict applied something")
	}
	a.fail(2, string(wire.CodeUsage), "vault", "merge", "f", "--ours", "--theirs")
	var res wire.MergeResult
	a.into(&res, "vault", "merge", "f", "--take-theirs", "/a.txt")
	if !res.Applied || res.Into != "w" || len(res.Conflicts) != 1 || res.Conflicts[0].Resolution != wire.MergeTheirs {
		t.Fatalf("merge %+v", res)
	}
	if a.cat("/a.txt") != "fork" || a.cat("/n.txt") != "new" || a.cat("/k.txt") != "keep" {
		t.Fatal("merged content wrong")
	}
}

// proxy exec --fork runs in a new fork and leaves the vault untouched;
// the fork merges back.
func TestProxyExecFork(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "w", "--use")
	a.write("base\n", "/a.txt")
	flags := []string{"--sandbox", "none", "--allow-writable-trust", "--mount-mode", "materialize"}
	r := a.proxy(append(flags, "--fork", "try"), "sh", "-c", "echo try > a.txt")
	if r.code != 0 || r.env.Vault != "try" || r.env.ForkedFrom != "w" || len(r.env.Changes) != 1 {
		t.Fatalf("run: %d %s", r.code, r.raw)
	}
	if a.cat("/a.txt") != "base\n" || a.cat("--vault", "try", "/a.txt") != "try\n" {
		t.Fatal("the run changed the parent, or not the fork")
	}
	if r := a.proxy(append(flags, "--fork", "try"), "true"); r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeAlreadyExists {
		t.Fatalf("fork name taken: %d %s", r.code, r.raw)
	}
	a.ok("vault", "merge", "try")
	if a.cat("/a.txt") != "try\n" {
		t.Fatal("not merged")
	}
}
