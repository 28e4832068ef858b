# A small stand-alone policy for the replay tests: its version 2
# (../v2) changes some decisions, which the tests expect replay to find.
package avfs

levels := ["allow", "allow_with_checkpoint", "require_approval", "deny"]

rank := {"allow": 0, "allow_with_checkpoint": 1, "require_approval": 2, "deny": 3}

found contains {"id": "t.allow.default", "message": "by default", "decision": "allow"}

found contains {"id": "t.deny.network", "message": "network", "decision": "deny"} if {
	some c in input.commands
	c.program in {"curl", "wget"}
}

found contains {"id": "t.approval.git_push", "message": "push", "decision": "require_approval"} if {
	some c in input.commands
	c.program == "git"
	c.operands[0] == "push"
}

found contains {"id": "t.checkpoint.write", "message": "write", "decision": "allow_with_checkpoint"} if {
	some c in input.commands
	c.program in {"rm", "touch"}
}

top := max({rank[r.decision] | some r in found})

decision := {"decision": levels[top], "reasons": [r | some r in found; rank[r.decision] == top]}
