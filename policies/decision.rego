# METADATA
# title: avfs decision
# description: |
#   The entrypoint avfs evaluates, data.avfs.decision: the highest decision
#   that any rule gives for any of the input's commands, on the lattice
#   deny > require_approval > allow_with_checkpoint > allow, with the reasons.
#   Rules live in packages under data.avfs.rules (this bundle) and
#   data.extensions (extension bundles); each defines a set "reasons" of
#   objects {id, message, decision} built with data.avfs.lib.reason.
package avfs

import data.avfs.lib

# findings are the reasons given by every rule package.
findings contains r if some r in data.avfs.rules[_].reasons

findings contains r if some r in data.extensions[_].reasons

# METADATA
# title: Read-only commands are allowed
# custom:
#   id: avfs.allow.read_only
#   decision: allow
baseline := lib.reason(rego.metadata.rule(), "") if count(lib.changes) == 0

# METADATA
# title: Commands that may change the vault run after a checkpoint
# custom:
#   id: avfs.checkpoint.changes
#   decision: allow_with_checkpoint
baseline := lib.reason(rego.metadata.rule(), concat(", ", lib.changes)) if {
	count(lib.changes) > 0
	not input.request.readonly
}

# METADATA
# title: A read-only run cannot change the vault, so it needs no checkpoint
# description: |
#   With --readonly the vault is mounted read-only (or its copy is thrown
#   away), so what the command writes never reaches the vault.
# custom:
#   id: avfs.allow.readonly_run
#   decision: allow
baseline := lib.reason(rego.metadata.rule(), concat(", ", lib.changes)) if {
	count(lib.changes) > 0
	input.request.readonly
}

# level is the rank of the decision: the highest of the findings and the baseline.
level := max({lib.rank(r.decision) | some r in findings} | {lib.rank(baseline.decision)})

# reasons are every finding, and the baseline when nothing ranks above it.
reasons contains r if some r in findings

reasons contains baseline if lib.rank(baseline.decision) == level

# decision is what avfs reads.
decision := {
	"decision": lib.decisions[level],
	"reasons": [r | some r in reasons],
}
