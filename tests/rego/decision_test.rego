package avfs.decision_test

import data.avfs.lib
import data.avfs.testing as t

# --- the lattice ------------------------------------------------------------

test_lattice_ranks if {
	lib.rank("allow") < lib.rank("allow_with_checkpoint")
	lib.rank("allow_with_checkpoint") < lib.rank("require_approval")
	lib.rank("require_approval") < lib.rank("deny")
	lib.rank("maybe") == lib.rank("deny")
	[lib.decisions[lib.rank(d)] | some d in lib.decisions] == lib.decisions
}

test_highest_decision_wins if {
	inner := t.in_script([
		t.cmd(["ls"]),
		t.cmd(["rm", "x"]),
		t.cmd(["curl", "https://x"]),
		t.wrapped([["sudo"]], ["ls"]),
	])
	r := t.result(t.sh_c("ls; rm x; curl https://x; sudo ls", inner, {}))
	r.decision == "deny"
	{x.id | some x in r.reasons} == {"avfs.deny.privileged", "avfs.approval.network"}
}

test_baseline_only_at_the_top if {
	# approval outranks the checkpoint baseline: the baseline is not reported.
	inner := t.in_script([t.cmd(["rm", "x"]), t.cmd(["curl", "https://x"])])
	r := t.result(t.sh_c("rm x; curl https://x", inner, {}))
	r.decision == "require_approval"
	{x.id | some x in r.reasons} == {"avfs.approval.network"}
}

test_top_level_command_when_commands_missing if {
	inp := object.remove(t.argv_input(["curl", "x"]), {"commands"})
	t.decision_of(inp) == "require_approval"
	empty := object.union(t.argv_input(["rm", "x"]), {"commands": []})
	t.decision_of(empty) == "allow_with_checkpoint"
}

# --- extension bundles ------------------------------------------------------

ext_reason(decision) := {"id": "acme.test", "decision": decision, "message": "acme says so"}

test_extension_escalates if {
	r := t.result(t.argv_input(["ls"])) with data.extensions as {"acme": {"reasons": {ext_reason("require_approval")}}}
	r.decision == "require_approval"
	r.reasons == [ext_reason("require_approval")]
}

test_extension_at_baseline_level if {
	r := t.result(t.argv_input(["rm", "x"])) with data.extensions as {"acme": {"reasons": {ext_reason("allow_with_checkpoint")}}}
	r.decision == "allow_with_checkpoint"
	count(r.reasons) == 2
}

test_extension_cannot_lower if {
	r := t.result(t.argv_input(["rm", "x"])) with data.extensions as {"acme": {"reasons": {ext_reason("allow")}}}
	r.decision == "allow_with_checkpoint"
}

test_unknown_decision_fails_closed if {
	r := t.result(t.argv_input(["ls"])) with data.extensions as {"acme": {"reasons": {ext_reason("maybe")}}}
	r.decision == "deny"
}

# --- reasons from metadata --------------------------------------------------

test_reason_from_metadata if {
	lib.reason({"title": "T", "custom": {"id": "x.y", "decision": "require_approval"}}, "cmd") == {
		"id": "x.y",
		"decision": "require_approval",
		"message": "T: cmd",
	}
	lib.reason({"title": "T", "custom": {"id": "x.y", "decision": "allow"}}, "") == {
		"id": "x.y",
		"decision": "allow",
		"message": "T",
	}
}

test_reason_without_metadata_fails_closed if {
	lib.reason({}, "") == {"id": "avfs.unnamed_rule", "decision": "deny", "message": "unnamed rule"}
}

test_every_default_reason_has_metadata if {
	every inp in [
		t.argv_input(["sudo", "ls"]),
		t.argv_input(["dd", "of=/dev/sda"]),
		t.argv_input(["curl", "x"]),
		t.argv_input(["rsync", "a", "h:b"]),
		t.argv_input(["git", "push"]),
		t.argv_input(["npm", "i"]),
		t.argv_input(["ls"]),
		t.argv_input(["rm", "x"]),
	] {
		every r in t.result(inp).reasons {
			r.id != "avfs.unnamed_rule"
			startswith(r.id, "avfs.")
		}
	}
}
