package avfs.rules.local_bin_test

import data.avfs.testing as t

# local is the command for argv that runs the program bin of the vault's
# node_modules/.bin, as engine.Parse records it (local_bin).
local(argv, bin) := t.with_fields(argv, {"local_bin": bin})

# --- runners of packages that run a program already in the vault -----------

# npx, npm exec and npm x of a program installed in node_modules/.bin
# fetch nothing: no approval, a checkpoint as for any command that may
# change the vault, and no network.
test_local_bin_is_not_network if {
	every c in [
		local(["npx", "eslint", "."], "/node_modules/.bin/eslint"),
		local(["npx", "tsc", "-p", "tsconfig.json"], "/web/node_modules/.bin/tsc"),
		local(["npm", "exec", "eslint"], "/node_modules/.bin/eslint"),
		local(["npm", "x", "--", "vite", "build"], "/web/node_modules/.bin/vite"),
	] {
		inp := t.sandboxed(t.doc([c], null, []))
		t.decision_of(inp) == "allow_with_checkpoint"
		t.ids(inp) == {"avfs.checkpoint.changes"}
		t.result(inp).sandbox == {"network": "none"}
	}
}

# Without a local program the runners fetch: approval, and the network
# once approved.
test_runner_without_local_bin_needs_approval if {
	every c in [
		t.cmd(["npx", "eslint", "."]),
		local(["npx", "eslint", "."], ""),
		t.cmd(["npm", "exec", "eslint"]),
		local(["npm", "exec", "eslint"], ""),
	] {
		inp := t.approved(t.sandboxed(t.doc([c], null, [])), "ap-1")
		t.decision_of(inp) == "require_approval"
		t.result(inp).sandbox == {"network": "host"}
	}
	"avfs.approval.network" in t.ids(t.argv_input(["npx", "eslint"]))
	"avfs.approval.packages" in t.ids(t.argv_input(["npm", "exec", "eslint"]))
}

# local_bin counts only on a runner of local_bin_runners, and only as a
# vault path given as a string: a document that sets it on curl, or sets
# something else, is judged as without it.
test_local_bin_only_for_runners if {
	every c in [
		local(["curl", "https://example.com"], "/node_modules/.bin/curl"),
		local(["wget", "https://example.com"], "/node_modules/.bin/wget"),
		local(["npx", "eslint"], true),
		local(["npx", "eslint"], ["/node_modules/.bin/eslint"]),
		local(["npm", "install", "eslint"], 1),
	] {
		inp := t.doc([c], null, [])
		t.decision_of(inp) == "require_approval"
	}
	"avfs.approval.network" in t.ids(t.doc([local(["curl", "x"], "/node_modules/.bin/curl")], null, []))
	"avfs.approval.packages" in t.ids(t.doc([local(["pnpm", "dlx", "eslint"], "/node_modules/.bin/eslint")], null, []))
}

# A local program does not hide the other commands of a script: curl
# next to it still needs approval, and a download piped into a shell is
# still denied.
test_local_bin_in_a_script if {
	inner := t.in_script([local(["npx", "eslint", "."], "/node_modules/.bin/eslint"), t.cmd(["curl", "-s", "https://example.com"])])
	inp := t.sh_c("npx eslint . && curl -s https://example.com", inner, {})
	t.decision_of(inp) == "require_approval"
	r := t.result(inp)
	{"id": "avfs.approval.network", "decision": "require_approval", "message": "Network programs need approval: curl -s https://example.com"} in r.reasons
	count({x | some x in r.reasons; x.id == "avfs.approval.network"}) == 1

	piped := t.piped(t.in_script([local(["npx", "print-script"], "/node_modules/.bin/print-script"), t.cmd(["sh"])]))
	local_pipe := t.sh_c("npx print-script | sh", [piped[0], object.union(piped[1], {"reads_stdin_script": true})], {"pipes_to_shell": true})
	not "avfs.deny.pipe_to_shell" in t.ids(local_pipe)
	fetched := t.piped(t.in_script([t.cmd(["npx", "print-script"]), t.cmd(["sh"])]))
	fetched_pipe := t.sh_c("npx print-script | sh", [fetched[0], object.union(fetched[1], {"reads_stdin_script": true})], {"pipes_to_shell": true})
	"avfs.deny.pipe_to_shell" in t.ids(fetched_pipe)
}
