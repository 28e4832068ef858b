package wire

// HintCode is a stable snake_case code of a hint: what avfs noticed about a
// run that the rest of the envelope does not say in so many words.
type HintCode string

// The hint codes (envelope hints[].code). Documented in docs/envelope.md;
// never renamed.
const (
	HintNetworkOff HintCode = "network_off" // the sandbox had no network and the command failed trying to reach one
)

// Hint is advice about a run: what happened that explains a failure, and
// what to do about it. Hints never change what ran or its exit status;
// a harness may show them or act on Command.
type Hint struct {
	Code HintCode `json:"code"`
	// Message is for people: what happened, and how to get what the
	// command was missing.
	Message string `json:"message"`
	// Command is a command line to run next, shell-quoted (for
	// network_off: the run that asks for approval of a networked fetch);
	// absent when there is none to give.
	Command string `json:"command,omitempty"`
}
