package avfs

decision := {"decision": "allow", "reasons": ["not an object"]}
