package avfs

# The decision is lower than its own reason: the engine raises it.
decision := {
	"decision": "allow",
	"reasons": [{"id": "test.deny", "message": "denied by a reason", "decision": "deny"}],
}
