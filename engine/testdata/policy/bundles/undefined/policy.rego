package avfs

# decision is never defined: the input has no field "nothing".
decision := {"decision": "allow", "reasons": []} if input.nothing
