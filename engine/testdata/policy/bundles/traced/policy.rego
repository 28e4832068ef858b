package avfs

decision := {"decision": d, "reasons": []} if {
	program := input.command.program
	trace(sprintf("program is %s", [program]))
	d := verdict(program)
}

verdict(p) := "allow" if p == "ls"

verdict(p) := "deny" if p != "ls"
