# METADATA
# title: ACME extension rules
# description: |
#   The worked examples of docs/policy.md. Self-contained so that
#   `opa build` can compile it alone: it reads the rule data.avfs.lib.commands
#   of the default bundle but calls none of its functions.
package extensions.acme

# METADATA
# title: Recursive deletes outside src/ are denied
# custom:
#   id: acme.deny.rm_outside_src
#   decision: deny
reasons contains reason(rego.metadata.rule(), cmd.raw) if {
	some i, cmd in data.avfs.lib.commands
	cmd.program == "rm"
	recursive(cmd)
	some p in input.paths
	p.command == i
	not in_src(p.path)
}

# METADATA
# title: Deploying needs approval
# custom:
#   id: acme.approval.deploy
#   decision: require_approval
reasons contains reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in data.avfs.lib.commands
	cmd.program == "make"
	"deploy" in cmd.operands
}

reason(meta, subject) := {
	"id": meta.custom.id,
	"decision": meta.custom.decision,
	"message": sprintf("%s: %s", [meta.title, subject]),
}

recursive(cmd) if "-r" in cmd.flags

recursive(cmd) if "-R" in cmd.flags

recursive(cmd) if "--recursive" in cmd.flags

in_src(path) if startswith(path, "/src/")
