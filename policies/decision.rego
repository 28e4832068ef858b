# METADATA
# title: avfs decision
# description: |
#   The entrypoint avfs evaluates, data.avfs.decision: the highest decision
#   that any rule gives for any of the input's commands, on the lattice
#   deny > require_approval > allow_with_checkpoint > allow, with the reasons
#   and what the decision grants the sandbox ({"network": "host"} for an
#   approved run that needs the network, {"network": "none"} otherwise).
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

# METADATA
# title: An approved run that needs the network reaches the host's network
# description: |
#   A run that needs approval because it reaches the network (a finding in
#   host_network_reasons: network programs, remote sync, git remotes,
#   package installs) and comes with an approval id gets the host's
#   network in the sandbox; avfs runs it only once that approval verifies.
#   Every other run keeps a loopback of its own. The subject is the
#   approval id.
# custom:
#   id: avfs.sandbox.network_host
#   decision: require_approval
network_grant := lib.reason(rego.metadata.rule(), input.request.approval_id) if {
	lib.decisions[level] == "require_approval"
	is_string(input.request.approval_id)
	input.request.approval_id != ""
	some r in findings
	r.id in lib.cfg.host_network_reasons
}

reasons contains network_grant

# sandbox is what the decision grants the sandbox beyond its default view.
sandbox := {"network": network}

# network is "host" for an approved run that needs the network, else "none".
default network := "none"

network := "host" if network_grant

# config_problems say what is wrong with the configuration data
# (data.avfs.config). avfs evaluates it once, when it loads the policy,
# and denies every command while it is not empty.
config_problems := lib.config_problems

# decision is what avfs reads.
decision := {
	"decision": lib.decisions[level],
	"reasons": [r | some r in reasons],
	"sandbox": sandbox,
}
