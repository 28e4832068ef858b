# Version 2 of ../v1: curl needs approval instead of being denied
# (looser), a git push is denied (stricter), rm checkpoints under a rule
# of its own (the same decision for another reason).
package avfs

levels := ["allow", "allow_with_checkpoint", "require_approval", "deny"]

rank := {"allow": 0, "allow_with_checkpoint": 1, "require_approval": 2, "deny": 3}

found contains {"id": "t.allow.default", "message": "by default", "decision": "allow"}

found contains {"id": "t.deny.network", "message": "network", "decision": "deny"} if {
	some c in input.commands
	c.program == "wget"
}

found contains {"id": "t.approval.network", "message": "network", "decision": "require_approval"} if {
	some c in input.commands
	c.program == "curl"
}

found contains {"id": "t.deny.git_push", "message": "push", "decision": "deny"} if {
	some c in input.commands
	c.program == "git"
	c.operands[0] == "push"
}

found contains {"id": "t.checkpoint.write", "message": "write", "decision": "allow_with_checkpoint"} if {
	some c in input.commands
	c.program == "touch"
}

found contains {"id": "t.checkpoint.remove", "message": "remove", "decision": "allow_with_checkpoint"} if {
	some c in input.commands
	c.program == "rm"
}

top := max({rank[r.decision] | some r in found})

decision := {"decision": levels[top], "reasons": [r | some r in found; rank[r.decision] == top]}
