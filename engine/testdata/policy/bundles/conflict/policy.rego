package avfs

# Two bodies give different values for ls: an eval_conflict_error.
decision := {"decision": "allow", "reasons": []} if input.command.program == "ls"

decision := {"decision": "deny", "reasons": []} if input.command.argv[0] == "ls"
