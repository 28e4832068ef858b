// Package engine turns the one command an agent asks to run into a policy
// decision. It has two halves:
//
//   - Parse reads the command (an argv or a shell script) into a
//     wire.Input document: wrappers such as sudo, env and xargs peeled off,
//     flags split, every simple command inside sh -c scripts, substitutions
//     and eval strings listed, and every path resolved against the vault.
//   - The policy half evaluates that document with embedded OPA (Rego) and
//     decides allow, allow_with_checkpoint, deny or require_approval.
//
// Parsing never runs anything and never fails on a script that does not
// parse: the error is recorded in the document and the policy decides.
package engine
