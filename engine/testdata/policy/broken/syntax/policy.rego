package avfs

decision := {"decision": "allow",
	"reasons": [
}
