# An allow-everything policy for the escape tests: whatever the command,
# it runs, so that only the sandbox can stop it.
package avfs

decision := {
	"decision": "allow",
	"reasons": [{"id": "test.allow_all", "message": "the escape tests allow everything", "decision": "allow"}],
}
