package avfs

decision := {"decision": "allow", "reasons": []} if {
	count(42) > 1
}
