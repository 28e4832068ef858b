package avfs

decision := {"decision": "maybe", "reasons": []}
