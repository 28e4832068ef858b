package avfs.effects_test

import data.avfs.testing as t

# change builds one entry of input.changes shaped like wire.EffectsChange.
change(path, op, kind, mode_before, mode_after) := {
	"path": path,
	"op": op,
	"kind": kind,
	"size_before": null,
	"size_after": 10,
	"mode_before": mode_before,
	"mode_after": mode_after,
	"content_hash": "",
	"lines_added": null,
	"lines_removed": null,
}

file_added(path) := change(path, "added", "file", "", "0644")

file_modified(path) := change(path, "modified", "file", "0644", "0644")

file_deleted(path) := change(path, "deleted", "file", "0644", "")

dir_added(path) := change(path, "added", "dir", "", "0755")

# effects builds an input shaped like wire.EffectsInput for argv's run.
effects(argv, changes) := {
	"schema_version": 1,
	"command": t.argv_input(argv),
	"decision": "allow_with_checkpoint",
	"process": {"exit_code": 0, "signal": "", "timed_out": false, "duration_ms": 5},
	"changes": changes,
	"totals": {
		"files": count(changes),
		"bytes_written": 0,
		"deleted": count([c | some c in changes; c.op == "deleted"]),
	},
}

result(inp) := r if {
	r := data.avfs.effects.decision with input as inp
}

decision_of(inp) := result(inp).decision

ids(inp) := {r.id | some r in result(inp).reasons}

test_ordinary_changes_are_kept if {
	inp := effects(["make"], [file_added("/src/main.o"), file_modified("/src/main.c"), dir_added("/build")])
	decision_of(inp) == "allow"
	ids(inp) == {"avfs.effects.keep"}
}

test_no_changes_are_kept if {
	decision_of(effects(["true"], [])) == "allow"
}

test_protected_paths_need_approval if {
	every c in [
		file_added("/.git/hooks/pre-commit"),
		file_modified("/repo/.git/hooks/post-checkout"),
		file_modified("/.git/config"),
		file_deleted("/.git/config"),
		file_added("/.github/workflows/ci.yml"),
		file_modified("/.github/workflows/sub/release.yaml"),
		file_modified("/.gitlab-ci.yml"),
		file_added("/svc/.gitlab-ci.yml"),
		file_added("/.circleci/config.yml"),
		file_modified("/Jenkinsfile"),
	] {
		inp := effects(["sh", "-c", "x"], [c])
		decision_of(inp) == "require_approval"
		ids(inp) == {"avfs.effects.protected_path"}
	}
}

test_sample_hooks_are_inert if {
	inp := effects(["cp", "a", "b"], [file_added("/.git/hooks/pre-commit.sample")])
	decision_of(inp) == "allow"
}

test_git_init_creates_a_repository if {
	changes := [
		dir_added("/.git"),
		file_added("/.git/config"),
		dir_added("/.git/hooks"),
		file_added("/.git/hooks/pre-commit.sample"),
		file_added("/.git/HEAD"),
	]
	decision_of(effects(["git", "init"], changes)) == "allow"
	decision_of(effects(["git", "clone", "u", "sub"], [dir_added("/sub/.git"), file_added("/sub/.git/config")])) == "allow"
}

test_repository_config_without_its_creation_needs_approval if {
	# The .git directory existed: a change to a repository, not a new one.
	decision_of(effects(["git", "init"], [file_added("/.git/config")])) == "require_approval"

	# A new repository made by something other than git init or clone.
	decision_of(effects(["sh", "-c", "x"], [dir_added("/.git"), file_added("/.git/config")])) == "require_approval"

	# git init does not make hooks that run.
	decision_of(effects(["git", "init"], [dir_added("/.git"), file_added("/.git/hooks/pre-commit")])) == "require_approval"

	# A modified config is never new.
	decision_of(effects(["git", "init"], [dir_added("/.git"), file_modified("/.git/config")])) == "require_approval"
}

test_many_deletions_need_approval if {
	many := [file_deleted(sprintf("/src/f%d.c", [i])) | some i in numbers.range(1, 201)]
	inp := effects(["rm", "-rf", "src"], many)
	decision_of(inp) == "require_approval"
	ids(inp) == {"avfs.effects.many_deletions"}

	# At the limit, and disposable paths not counted.
	decision_of(effects(["rm", "-rf", "src"], array.slice(many, 0, 200))) == "allow"
	deps := [file_deleted(sprintf("/node_modules/p/f%d.js", [i])) | some i in numbers.range(1, 500)]
	decision_of(effects(["rm", "-rf", "node_modules"], deps)) == "allow"
}

test_setuid_and_setgid_need_approval if {
	every mode in ["4755", "2755", "6755", "4700", "2711", "7777"] {
		inp := effects(["chmod", mode, "x"], [change("/x", "modified", "file", "0755", mode)])
		decision_of(inp) == "require_approval"
		"avfs.effects.setuid" in ids(inp)
	}
	every mode in ["0755", "1777", "0644"] {
		not "avfs.effects.setuid" in ids(effects(["chmod", mode, "x"], [change("/bin/x", "modified", "file", "0755", mode)]))
	}
}

test_new_executables_outside_expected_places_need_approval if {
	every c in [
		change("/payload", "added", "file", "", "0755"),
		change("/src/tool", "modified", "file", "0644", "0744"),
		change("/lib/x.so", "added", "file", "", "0701"),
		change("/a", "added", "file", "", "0710"),
	] {
		inp := effects(["sh", "-c", "x"], [c])
		decision_of(inp) == "require_approval"
		ids(inp) == {"avfs.effects.executable"}
	}
}

test_commands_that_make_executables if {
	every argv in [
		["chmod", "+x", "tool"],
		["make"],
		["go", "build", "-o", "app", "."],
		["cc", "-o", "a", "a.c"],
		["git", "checkout", "main"],
	] {
		decision_of(effects(argv, [change("/app", "added", "file", "", "0755")])) == "allow"
	}
	decision_of(effects(["python3", "gen.py"], [change("/app", "added", "file", "", "0755")])) == "require_approval"
	decision_of(effects(["tar", "xf", "a.tar"], [change("/app", "added", "file", "", "0755")])) == "require_approval"
}

test_expected_executables_are_kept if {
	every c in [
		change("/bin/tool", "added", "file", "", "0755"),
		change("/node_modules/.bin/tsc", "added", "file", "", "0755"),
		change("/target/debug/app", "added", "file", "", "0755"),
		change("/scripts/release", "added", "file", "", "0755"),
		change("/deploy.sh", "added", "file", "", "0755"),
		change("/tool", "modified", "file", "0755", "0755"),
		change("/dir", "added", "dir", "", "0755"),
		change("/gone", "deleted", "file", "0755", ""),
	] {
		decision_of(effects(["sh", "-c", "x"], [c])) == "allow"
	}
}

test_malformed_input_is_denied if {
	every inp in [
		{},
		{"changes": "x", "totals": {"files": 0, "deleted": 0}},
		{"changes": [{"path": 1, "op": "added", "kind": "file", "mode_before": "", "mode_after": ""}], "totals": {"files": 1, "deleted": 0}},
		{"changes": [], "totals": {}},
	] {
		decision_of(inp) == "deny"
		"avfs.effects.malformed_input" in ids(inp)
	}
}

test_extension_reasons_count if {
	ext := {"x": {"effects_reasons": {{"id": "ext.hold", "message": "m", "decision": "deny"}}}}
	d := data.avfs.effects.decision with input as effects(["true"], []) with data.extensions as ext
	d.decision == "deny"
	{r.id | some r in d.reasons} == {"ext.hold"}
}

test_config_needs_the_effects_keys if {
	cfg := object.remove(data.avfs.config, ["effects_max_deletions"])
	problems := data.avfs.lib.config_problems with data.avfs.config as cfg
	"data.avfs.config.effects_max_deletions must be a whole number, 0 or more: it is missing" in problems
	bad := object.union(data.avfs.config, {"effects_max_deletions": 1.5})
	bad_problems := data.avfs.lib.config_problems with data.avfs.config as bad
	count(bad_problems) == 1
}
