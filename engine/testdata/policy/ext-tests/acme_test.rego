package extensions.acme_test

import data.avfs.lib

# cmd is a command as avfs would parse it (see docs/input.md).
cmd(argv, flags) := {
	"argv": argv, "raw": concat(" ", argv), "program": argv[0], "program_path": "",
	"args": array.slice(argv, 1, count(argv)), "flags": flags, "flag_values": {},
	"operands": [a | some a in array.slice(argv, 1, count(argv)); not startswith(a, "-")],
	"wrappers": [], "assignments": {}, "redirects": [], "origin": "argv",
	"pipeline": 0, "pipeline_len": 1, "reads_stdin_script": false,
}

doc(c, paths) := {
	"schema_version": 1, "command": c, "commands": [c], "script": null, "paths": paths,
	"cwd": "/", "env": [], "vault": {}, "request": {},
}

path(p) := {"arg": p, "path": p, "inside_vault": true, "source": "arg", "command": 0}

decision(inp) := d if {
	d := data.avfs.decision.decision with input as inp
}

test_rm_rf_outside_src_is_denied if {
	decision(doc(cmd(["rm", "-rf", "docs"], ["-r", "-f"]), [path("/docs")])) == "deny"
}

test_rm_rf_inside_src_is_checkpointed if {
	decision(doc(cmd(["rm", "-rf", "src/old"], ["-r", "-f"]), [path("/src/old")])) == "allow_with_checkpoint"
}

test_make_deploy_needs_approval if {
	decision(doc(cmd(["make", "deploy"], []), [])) == "require_approval"
	lib.rank(decision(doc(cmd(["make", "test"], []), []))) < lib.rank("require_approval")
}

test_every_recursive_flag if {
	every flags in [["-R"], ["--recursive"]] {
		decision(doc(cmd(["rm", flags[0], "docs"], flags), [path("/docs")])) == "deny"
	}
}
