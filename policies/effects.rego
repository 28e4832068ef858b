# METADATA
# title: avfs effects decision
# description: |
#   The second entrypoint, data.avfs.effects.decision: evaluated after a
#   run, over what it did (input: the first decision's input as command,
#   the first decision, how the process ended, every change with sizes,
#   modes, content hash and line counts, and totals; docs/input.md,
#   "Effects"), before the changes become the vault's. The same lattice as
#   data.avfs.decision: allow keeps the changes, deny returns the vault to
#   the run's checkpoint, require_approval holds them until an approval
#   grants or denies them. Rules live in packages under
#   data.avfs.effect_rules (this bundle) and data.extensions (extension
#   bundles, as a set "effects_reasons"), each a set of reasons built with
#   data.avfs.lib.reason.
package avfs.effects

import data.avfs.lib

# findings are the reasons given by every effects rule package.
findings contains r if some r in data.avfs.effect_rules[_].reasons

findings contains r if some r in data.extensions[_].effects_reasons

# METADATA
# title: The run's changes are kept
# custom:
#   id: avfs.effects.keep
#   decision: allow
baseline := lib.reason(rego.metadata.rule(), sprintf("%d changed", [count(changes)]))

# changes are input.changes, or none when the input has no list of them
# (malformed_input then denies).
changes := c if {
	c := input.changes
	is_array(c)
} else := []

# METADATA
# title: The effects input is not shaped like wire.EffectsInput, so nothing is kept
# custom:
#   id: avfs.effects.malformed_input
#   decision: deny
findings contains lib.reason(rego.metadata.rule(), "") if not valid_input

# valid_input is true when the fields the rules read have their types.
valid_input if {
	is_array(input.changes)
	every c in input.changes {
		is_string(c.path)
		is_string(c.op)
		is_string(c.kind)
		is_string(c.mode_after)
		is_string(c.mode_before)
	}
	is_number(input.totals.deleted)
	is_number(input.totals.files)
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
