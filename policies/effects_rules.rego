# METADATA
# title: Default effects rules
# description: |
#   What a run did that needs a person to look before it becomes the
#   vault's: changes to files that run code later (git hooks, git
#   configuration, CI configuration), many deletions, setuid or setgid
#   files, and new executables outside the places builds put them. The
#   lists are data: data.avfs.config.effects_* (policies/data.json).
package avfs.effect_rules.defaults

import data.avfs.lib

# changes are the entries of input.changes whose fields the rules read
# have their types (the entrypoint denies an input where one has not).
changes := [c |
	some c in input.changes
	well_formed(c)
] if {
	is_array(input.changes)
} else := []

well_formed(c) if {
	is_string(c.path)
	is_string(c.op)
	is_string(c.kind)
	is_string(c.mode_before)
	is_string(c.mode_after)
}

# METADATA
# title: A file that later runs code (git hooks, git configuration, CI configuration) changed
# description: |
#   A path matching effects_approval_paths (globs over vault paths, "/" as
#   separator) was added, modified or deleted, and none of
#   effects_approval_paths_except matches it (git's inert *.sample hooks).
#   A repository's configuration created together with its .git directory
#   by a command of effects_repo_creators (git init, git clone) is a new
#   repository, not a change to one.
# custom:
#   id: avfs.effects.protected_path
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), sprintf("%s (%s)", [c.path, c.op])) if {
	some c in changes
	protected(c)
	not new_repository_file(c)
}

protected(c) if {
	some pattern in lib.cfg.effects_approval_paths
	glob.match(pattern, ["/"], c.path)
	not excepted(c.path)
}

excepted(path) if {
	some pattern in lib.cfg.effects_approval_paths_except
	glob.match(pattern, ["/"], path)
}

# new_repository_file is true for a repository's configuration
# (.git/config) added together with its .git directory, by a command that
# creates repositories. Hooks are never new: git init and clone make only
# inert samples.
new_repository_file(c) if {
	c.op == "added"
	endswith(c.path, "/.git/config")
	gitdir := trim_suffix(c.path, "/config")
	some d in changes
	d.path == gitdir
	d.op == "added"
	d.kind == "dir"
	creates_repository
}

creates_repository if {
	some cmd in object.get(input.command, "commands", [])
	some sub in lib.cfg.effects_repo_creators[cmd.program]
	sub in cmd.operands
}

# METADATA
# title: The run deleted more files than allowed without a look
# description: |
#   More than effects_max_deletions paths were deleted, not counting those
#   matching effects_disposable_paths (dependencies, build outputs, caches
#   that a build makes again).
# custom:
#   id: avfs.effects.many_deletions
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), sprintf("%d deleted (more than %d)", [n, lib.cfg.effects_max_deletions])) if {
	n := count([c | some c in changes; c.op == "deleted"; not disposable(c.path)])
	n > lib.cfg.effects_max_deletions
}

disposable(path) if {
	some pattern in lib.cfg.effects_disposable_paths
	glob.match(pattern, ["/"], path)
}

# METADATA
# title: The run left a setuid or setgid file
# custom:
#   id: avfs.effects.setuid
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), sprintf("%s (%s)", [c.path, c.mode_after])) if {
	some c in changes
	c.op != "deleted"
	setid(c.mode_after)
}

# setid is true for an octal mode with the setuid (4000) or setgid (2000)
# bit: its four-digit form starts with 2 to 7.
setid(mode) if {
	count(mode) == 4
	substring(mode, 0, 1) in {"2", "3", "4", "5", "6", "7"}
}

# METADATA
# title: A file became executable outside the places builds put executables, and no command of the run makes executables
# description: |
#   A regular file that was added executable, or became executable, at a
#   path none of effects_executable_paths matches (bin directories,
#   dependencies, build outputs, scripts), by a run none of whose commands
#   is in effects_executable_makers (chmod, install, compilers, build
#   tools, git): an executable the command line did not show would appear.
# custom:
#   id: avfs.effects.executable
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), sprintf("%s (%s)", [c.path, c.mode_after])) if {
	some c in changes
	c.kind == "file"
	c.op != "deleted"
	executable(c.mode_after)
	not executable(c.mode_before)
	not expected_executable(c.path)
	not makes_executables
}

# makes_executables is true when a command of the run is one whose work is
# making files executable.
makes_executables if {
	some cmd in object.get(input.command, "commands", [])
	lib.program_in(cmd.program, lib.cfg.effects_executable_makers)
}

# executable is true for an octal mode with an execute bit (owner, group
# or other).
executable(mode) if {
	count(mode) >= 3
	some digit in array.slice(split(mode, ""), count(mode) - 3, count(mode))
	digit in {"1", "3", "5", "7"}
}

expected_executable(path) if {
	some pattern in lib.cfg.effects_executable_paths
	glob.match(pattern, ["/"], path)
}
