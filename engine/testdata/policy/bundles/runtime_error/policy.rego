package avfs

# to_number("ls") is a runtime error (builtin errors are strict in avfs).
decision := {"decision": "allow", "reasons": []} if to_number(input.command.program) > 0
