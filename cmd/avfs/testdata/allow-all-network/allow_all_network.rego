# allow-all with the host network granted to the sandbox.
package avfs

decision := {
	"decision": "allow",
	"reasons": [{"id": "test.allow_all_network", "message": "the escape tests allow everything, with the host network", "decision": "allow"}],
	"sandbox": {"network": "host"},
}
