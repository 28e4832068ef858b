package avfs.allow_test

import data.avfs.testing as t

# --- avfs.allow.read_only ---------------------------------------------------

test_read_only_commands if {
	every argv in [
		["ls", "-la"],
		["cat", "README.md"],
		["head", "-n", "5", "f"],
		["tail", "-f", "log"],
		["wc", "-l", "f"],
		["grep", "-rn", "TODO", "."],
		["rg", "--json", "x"],
		["find", ".", "-name", "*.go", "-type", "f"],
		["tree", "-L", "2"],
		["pwd"],
		["echo", "hello"],
		["printf", "%s\\n", "x"],
		["stat", "f"],
		["file", "f"],
		["diff", "-u", "a", "b"],
		["cmp", "a", "b"],
		["sort", "-u", "f"],
		["uniq", "-c", "f"],
		["which", "go"],
		["date", "+%s"],
		["true"],
		["/bin/ls"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "allow"
		t.ids(inp) == {"avfs.allow.read_only"}
	}
}

test_read_only_git if {
	every argv in [
		["git", "status"],
		["git", "log", "--oneline", "-5"],
		["git", "diff", "HEAD~1"],
		["git", "show", "HEAD"],
		["git", "rev-parse", "HEAD"],
		["git", "ls-files"],
		["git", "blame", "f"],
		["git", "branch"],
		["git", "branch", "-a", "-v"],
		["git", "branch", "--sort=-committerdate"],
		["git", "--no-pager", "log"],
	] {
		t.decision_of(t.argv_input(argv)) == "allow"
	}
}

test_read_only_pipelines_and_lists if {
	inner := t.in_script(array.concat(
		t.piped([t.cmd(["ls", "-la"]), t.cmd(["grep", "go"]), t.cmd(["wc", "-l"])]),
		[t.cmd(["cd", "src"]), t.cmd(["git", "status"])],
	))
	inp := t.sh_c("ls -la | grep go | wc -l; cd src && git status", inner, {})
	r := t.result(inp)
	r.decision == "allow"
	r.reasons == [{"id": "avfs.allow.read_only", "decision": "allow", "message": "Read-only commands are allowed"}]
}

test_read_only_with_harmless_redirects if {
	r := [{"op": "2>", "target": "/dev/null"}, {"op": "2>&", "target": "1"}, {"op": ">&", "target": "-"}, {"op": "<", "target": "in.txt"}]
	inp := t.sh_c("grep x f 2>/dev/null 2>&1 <in.txt", t.in_script([t.with_fields(["grep", "x", "f"], {"redirects": r})]), {"redirects": r})
	t.decision_of(inp) == "allow"
}

test_read_only_with_assignment if {
	inp := t.doc([t.with_fields(["grep", "x", "f"], {"assignments": {"LC_ALL": "C"}})], null, [])
	t.decision_of(inp) == "allow"
}

test_empty_script_is_read_only if {
	t.decision_of(t.sh_c("", [], {})) == "allow"
}

# --- avfs.checkpoint.changes ------------------------------------------------

test_changing_commands if {
	every argv in [
		["rm", "-rf", "build"],
		["mv", "a", "b"],
		["cp", "a", "b"],
		["chmod", "+x", "run.sh"],
		["sed", "-i", "s/a/b/", "f"],
		["tee", "out"],
		["git", "commit", "-m", "msg"],
		["git", "reset", "--hard"],
		["git", "clean", "-fdx"],
		["git", "checkout", "main"],
		["git", "rebase", "main"],
		["git", "stash"],
		["git"],
		["make"],
		["go", "build", "./..."],
		["python", "main.py"],
		["./configure"],
		["unknown-tool", "--flag"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "allow_with_checkpoint"
		t.ids(inp) == {"avfs.checkpoint.changes"}
	}
}

# --- avfs.allow.readonly_run ------------------------------------------------

test_readonly_run_needs_no_checkpoint if {
	inp := json.patch(t.argv_input(["rm", "-rf", "build"]), [{"op": "replace", "path": "/request/readonly", "value": true}])
	t.decision_of(inp) == "allow"
	data.avfs.decision.reasons == [{
		"id": "avfs.allow.readonly_run",
		"decision": "allow",
		"message": "A read-only run cannot change the vault, so it needs no checkpoint: rm -rf build",
	}] with input as inp
}

test_readonly_run_keeps_other_rules if {
	every argv in [["curl", "https://example.com"], ["sudo", "ls"]] {
		inp := json.patch(t.argv_input(argv), [{"op": "replace", "path": "/request/readonly", "value": true}])
		t.decision_of(inp) != "allow"
		not "avfs.allow.readonly_run" in t.ids(inp)
	}
}

test_readonly_read_only_command if {
	inp := json.patch(t.argv_input(["ls", "-la"]), [{"op": "replace", "path": "/request/readonly", "value": true}])
	t.ids(inp) == {"avfs.allow.read_only"}
}

test_read_only_programs_with_writing_options if {
	# A word the program's spec makes written or run (sort -o, find
	# -fprint, tree -o, sed -f …) makes the command a change.
	every role in ["write", "execute"] {
		p := object.union(t.path_entry("out", "/out", true, "arg"), {"role": role})
		inp := t.doc([t.cmd(["sort", "-o", "out", "in"])], null, [p])
		t.decision_of(inp) == "allow_with_checkpoint"
	}

	# Options that make a program change something without a path
	# (cfg.read_only_unless_args), and git configuration from the
	# environment.
	every argv in [["date", "-s", "2020-01-01"], ["date", "--set=x"], ["file", "-C", "-m", "magic"], ["git", "--config-env=core.pager=P", "log"], ["sed", "-i", "s/a/b/", "f"]] {
		t.decision_of(t.argv_input(argv)) == "allow_with_checkpoint"
	}

	# Writes to scratch stay off the vault.
	scratch := object.union(t.where_entry("/tmp/out", "/tmp/out", "scratch", "arg"), {"role": "write"})
	t.decision_of(t.sandboxed(t.doc([t.cmd(["sort", "-o", "/tmp/out", "in"])], null, [scratch]))) == "allow"
}

# Program text (input command.code) keeps a program read-only only when
# it matches cfg.read_only_code and none of cfg.unsafe_code.
test_read_only_code if {
	every c in [
		[["sed", "-n", "/re/p", "f"], ["/re/p"], "allow"],
		[["sed", "s/a/b/g;1d", "f"], ["s/a/b/g;1d"], "allow"],
		[["sed", "w /etc/x", "f"], ["w /etc/x"], "allow_with_checkpoint"],
		[["sed", "s/a/b/e", "f"], ["s/a/b/e"], "allow_with_checkpoint"],
		[["awk", "{print $2}", "f"], ["{print $2}"], "allow"],
		[["awk", "{print > \"x\"}", "f"], ["{print > \"x\"}"], "allow_with_checkpoint"],
		[["awk", "BEGIN{system(\"id\")}"], ["BEGIN{system(\"id\")}"], "allow_with_checkpoint"],
		[["jq", ".[] | .name", "f"], [".[] | .name"], "allow"],
	] {
		t.decision_of(t.doc([t.with_fields(c[0], {"code": c[1]})], null, [])) == c[2]
	}
}

# Only abbreviations at least as long as the shortest unambiguous one
# name a listed long option; other options keep the program read-only.
test_long_options_that_are_not_abbreviations if {
	every argv in [
		["sort", "--numeric-sort", "in"],
		["sort", "--", "in"],
		["sort", "--c", "in"],
		["diff", "--old-line-format=x", "a", "b"],
		["diff", "--o=x", "a", "b"],
		["date", "--date=now"],
		["git", "log", "--oneline"],
		["file", "--checking-printout", "x"],
	] {
		t.decision_of(t.argv_input(argv)) == "allow"
	}
}

test_vault_programs_are_not_read_only if {
	every argv in [["./ls"], ["bin/cat", "f"], ["./git", "status"], ["tools/git", "branch"], ["ls.sh"]] {
		t.decision_of(t.argv_input(argv)) == "allow_with_checkpoint"
	}
	t.decision_of(t.argv_input(["/usr/bin/git", "status"])) == "allow"
}

test_unsafe_assignments if {
	every a in [{"GIT_PAGER": "sh -c x"}, {"LD_PRELOAD": "x.so"}, {"PAGER": "x"}] {
		inp := t.doc([t.with_fields(["git", "log"], {"assignments": a})], null, [])
		t.decision_of(inp) == "allow_with_checkpoint"
		inp2 := t.doc([t.with_fields(["cat", "f"], {"assignments": a})], null, [])
		t.decision_of(inp2) == "allow_with_checkpoint"
	}
	branch := t.doc([t.with_fields(["git", "branch"], {"assignments": {"GIT_DIR": "x"}})], null, [])
	t.decision_of(branch) == "allow_with_checkpoint"
	branch_c := t.argv_input(["git", "-c", "x=y", "branch"])
	t.decision_of(branch_c) == "allow_with_checkpoint"
}

test_write_redirects if {
	every op in [">", ">>", "&>", "&>>", "2>", "1>", ">|", "<>", ">&", "3>|", "{fd}>", "{log_fd}>>", "{fd}>|", "{fd}<>"] {
		r := [{"op": op, "target": "out.txt"}]
		inp := t.sh_c("echo hi", t.in_script([t.with_fields(["echo", "hi"], {"redirects": r})]), {"redirects": r})
		res := t.result(inp)
		res.decision == "allow_with_checkpoint"
		res.reasons == [{
			"id": "avfs.checkpoint.changes",
			"decision": "allow_with_checkpoint",
			"message": sprintf("Commands that may change the vault run after a checkpoint: %s out.txt", [op]),
		}]
	}
}

# Named descriptors are closed or duplicated without writing a file, and
# other brace words are no descriptor.
test_named_descriptor_redirects_that_do_not_write if {
	every r in [{"op": "{fd}>&", "target": "-"}, {"op": "{fd}>&", "target": "2"}, {"op": "{fd}<", "target": "in.txt"}, {"op": "{1x}>", "target": "out.txt"}] {
		inp := t.sh_c("echo hi", t.in_script([t.with_fields(["echo", "hi"], {"redirects": [r]})]), {"redirects": [r]})
		t.decision_of(inp) == "allow"
	}
}

test_checkpoint_message_lists_changes if {
	inner := t.in_script([t.cmd(["ls"]), t.cmd(["rm", "-f", "a"]), t.cmd(["mv", "b", "c"])])
	r := t.result(t.sh_c("ls; rm -f a; mv b c", inner, {}))
	r.reasons == [{
		"id": "avfs.checkpoint.changes",
		"decision": "allow_with_checkpoint",
		"message": "Commands that may change the vault run after a checkpoint: mv b c, rm -f a",
	}]
}

test_shells_that_are_not_the_carrier if {
	# A nested sh -c is judged as a program: its script may be dynamic.
	nested := t.sh_c("bash -c ls", t.in_script([t.cmd(["bash", "-c", "ls"]), t.cmd(["ls"])]), {})
	t.decision_of(nested) == "allow_with_checkpoint"

	# sh -c without a parsed script, and a shell running a file.
	t.decision_of(t.argv_input(["sh", "-c", "ls"])) == "allow_with_checkpoint"
	t.decision_of(t.argv_input(["bash", "build.sh"])) == "allow_with_checkpoint"
}

# A --shell script without simple commands (assignments, comments) runs
# nothing: it is read-only.
test_shell_without_commands if {
	every source in ["x=1", "# a comment"] {
		inp := t.shell_doc(t.script(source, {}))
		t.decision_of(inp) == "allow"
		t.ids(inp) == {"avfs.allow.read_only"}
	}
}

# A statement with only assignments or redirections is an empty command.
empty(source, extra) := object.union(
	t.with_fields([""], {"argv": [], "raw": source, "program": "", "args": [], "flags": [], "operands": [], "origin": "script"}),
	extra,
)

test_empty_commands if {
	assign := t.sh_c("x=1; ls", array.concat([empty("x=1", {"assignments": {"x": "1"}})], t.in_script([t.cmd(["ls"])])), {})
	t.decision_of(assign) == "allow"
	not "avfs.deny.malformed_input" in t.ids(assign)

	redirect := t.sh_c("> log", [empty("> log", {"redirects": [{"op": ">", "target": "log"}]})], {})
	r := t.result(redirect)
	r.decision == "allow_with_checkpoint"
	{
		"id": "avfs.checkpoint.changes",
		"decision": "allow_with_checkpoint",
		"message": "Commands that may change the vault run after a checkpoint: > log",
	} in r.reasons

	# Variables that change what later commands do are not read-only.
	every kv in [{"LD_PRELOAD": "./x.so"}, {"PATH": "."}] {
		unsafe := t.sh_c("V=x; ls", array.concat([empty("V=x", {"assignments": kv})], t.in_script([t.cmd(["ls"])])), {})
		t.decision_of(unsafe) == "allow_with_checkpoint"
	}
}

test_path_assignment_not_read_only if {
	t.decision_of(t.argv_input(["ls"])) == "allow"
	t.decision_of(t.doc([t.with_fields(["ls"], {"assignments": {"PATH": "."}})], null, [])) == "allow_with_checkpoint"
}

# Shell builtins that only set the shell's options and variables are
# read-only; the variables they set are judged as assignments.
test_shell_builtins if {
	every argv in [["set", "-e"], ["export", "FOO=1"], ["unset", "X"], ["shopt", "-s", "nullglob"], [":"], ["type", "ls"]] {
		t.decision_of(t.argv_input(argv)) == "allow"
	}
	t.decision_of(t.doc([t.with_fields(["export", "LD_PRELOAD=./x.so"], {"assignments": {"LD_PRELOAD": "./x.so"}})], null, [])) == "allow_with_checkpoint"
}

# git branch with a listing flag and its value (as the parser records it)
# lists; with an operand it creates.
test_git_branch_listing_values if {
	inp := t.doc([t.with_fields(["git", "branch", "--contains", "abc"], {"operands": ["branch"], "flag_values": {"--contains": "abc"}})], null, [])
	t.decision_of(inp) == "allow"
	create := t.doc([t.with_fields(["git", "branch", "--contains", "abc"], {"operands": ["branch", "abc"]})], null, [])
	t.decision_of(create) == "allow_with_checkpoint"
}
