# METADATA
# title: avfs policy library
# description: |
#   Helpers shared by the default rules and by extension bundles: the decision
#   lattice, reasons built from rule metadata, and predicates over the input
#   document (commands, operands, redirects, paths). The lists they consult
#   are in data.avfs.config (policies/data.json).
package avfs.lib

# cfg holds the tunable lists of the default policy. Their shapes are
# checked by config_problems.
cfg := data.avfs.config

# config_shapes gives every key of data.avfs.config the rules read its
# shape, one of shapes.
config_shapes := {
	"read_only_programs": "strings",
	"read_only_unless_args": "string_lists",
	"read_only_code": "string_lists",
	"unsafe_code": "string_lists",
	"unsafe_assignment_prefixes": "strings",
	"git_read_only_subcommands": "strings",
	"git_branch_listing_flags": "strings",
	"network_programs": "strings",
	"network_subcommands": "string_lists",
	"local_bin_runners": "strings",
	"server_modules": "string_lists",
	"server_options": "string_lists",
	"server_programs": "strings",
	"command_options": "string_lists",
	"command_subcommands": "string_lists",
	"remote_sync_programs": "strings",
	"git_network_subcommands": "strings",
	"package_subcommands": "string_lists",
	"privileged_programs": "strings",
	"privileged_options": "string_lists",
	"privileged_setters": "strings",
	"device_prefixes": "strings",
	"host_paths_allowed": "strings",
	"host_path_prefixes_allowed": "strings",
	"host_network_reasons": "strings",
	"shells": "strings",
	"interpreters": "strings",
	"evaluators": "strings",
	"build_runners": "strings",
	"effects_approval_paths": "strings",
	"effects_approval_paths_except": "strings",
	"effects_repo_creators": "string_lists",
	"effects_max_deletions": "count",
	"effects_disposable_paths": "strings",
	"effects_executable_paths": "strings",
	"effects_executable_makers": "strings",
}

# shapes are the shapes of config_shapes: the JSON type of the value and
# what it must hold, for people.
shapes := {
	"strings": {"type": "array", "name": "a list of strings"},
	"string_lists": {"type": "object", "name": "an object of lists of strings"},
	"count": {"type": "number", "name": "a whole number, 0 or more"},
}

# config_problems say what is wrong with data.avfs.config: it is not an
# object, or a key of config_shapes is missing or has another shape (a
# string where a list belongs would match nothing, and let through what
# the list should catch). avfs evaluates it, as data.avfs.config_problems,
# once when it loads the policy, and denies every command while it is not
# empty.
config_problems contains "data.avfs.config is missing or not an object" if not is_object(data.avfs.config)

config_problems contains sprintf("data.avfs.config.%s must be %s: %s", [key, shapes[shape].name, mismatch(key, shape)]) if {
	is_object(data.avfs.config)
	some key, shape in config_shapes
	not has_shape_at(key, shape)
}

# has_shape_at is true when data.avfs.config has a value of the shape at
# key (and so false when the key is missing).
has_shape_at(key, shape) if has_shape(data.avfs.config[key], shape)

# mismatch says how the value of key differs from its shape.
mismatch(key, shape) := "an element is of another type" if {
	type_name(data.avfs.config[key]) == shapes[shape].type
} else := sprintf("it is of type %s", [type_name(data.avfs.config[key])]) if {
	key in object.keys(data.avfs.config)
} else := "it is missing"

# has_shape is true for a value of the shape.
has_shape(value, "strings") if string_list(value)

has_shape(value, "string_lists") if {
	is_object(value)
	every list in value {
		string_list(list)
	}
}

has_shape(value, "count") if {
	is_number(value)
	value >= 0
	value == round(value)
}

# string_list is true for a list of strings.
string_list(value) if {
	is_array(value)
	every s in value {
		is_string(s)
	}
}

# ranks orders the decision lattice: deny > require_approval > allow_with_checkpoint > allow.
ranks := {"allow": 0, "allow_with_checkpoint": 1, "require_approval": 2, "deny": 3}

# decisions names the ranks.
decisions := ["allow", "allow_with_checkpoint", "require_approval", "deny"]

# rank is the rank of decision d. Anything outside the lattice ranks as deny:
# the policy fails closed.
rank(d) := object.get(ranks, d, 3)

# reason builds a reason from the metadata of the rule that calls it, passed as
# rego.metadata.rule(): custom.id, custom.decision (deny when missing) and the
# title, followed by the subject (the command or path concerned) when not "".
reason(meta, subject) := {
	"id": object.get(meta, ["custom", "id"], "avfs.unnamed_rule"),
	"decision": object.get(meta, ["custom", "decision"], "deny"),
	"message": message(object.get(meta, "title", "unnamed rule"), subject),
}

message(title, "") := title

message(title, subject) := sprintf("%s: %s", [title, subject]) if subject != ""

# commands is every simple command of the input: input.commands, or the
# top-level command alone when the list is missing or empty. A --shell
# script that has no simple command (only assignments or comments, or it
# cannot be parsed) has none: its top-level command is an empty placeholder.
commands := cmds if {
	cmds := input.commands
	is_array(cmds)
	count(cmds) > 0
} else := [] if {
	is_array(input.commands)
	input.command.origin == "script"
	input.command.program == ""
} else := [input.command]

# malformed is true when the input is not shaped like wire.Input: a field
# the rules read is missing or has the wrong type. (Written as "not
# valid_input" because "not f(x.y)" is undefined, not true, when x.y is.)
malformed if not valid_input

valid_input if {
	is_object(input.command)
	every cmd in commands {
		well_formed(cmd)
	}
	is_array(input.paths)
	every p in input.paths {
		is_string(p.path)
		is_boolean(p.inside_vault)
	}
	valid_script
}

valid_script if input.script == null

valid_script if {
	is_string(input.script.parse_error)
	is_boolean(input.script.pipes_to_shell)
	is_array(input.script.redirects)
	is_array(input.script.functions)
}

# command_fields are the fields of a command the rules read.
command_fields := {"argv", "raw", "program", "args", "flags", "wrappers", "redirects", "assignments", "origin", "pipeline", "pipeline_len"}

# well_formed is true for a command with every field of command_fields, none
# of them null, that names its program or is an empty command. (avfs builds
# inputs from typed Go values, so the types are right; this guards
# hand-written documents.)
well_formed(cmd) if {
	fields := object.filter(cmd, command_fields)
	count(fields) == count(command_fields)
	not null in fields
	is_string(cmd.program)
	names_program(cmd)
}

names_program(cmd) if {
	cmd.program != ""
	count(cmd.argv) > 0
}

# An empty command stands for a statement of a script with only assignments
# or redirections (X=1, > log); an argv always names a program.
names_program(cmd) if empty_command(cmd)

empty_command(cmd) if {
	cmd.program == ""
	cmd.argv == []
	cmd.origin in {"script", "substitution", "eval"}
}

# program_in is true when the program, or its base name, is in list. The
# base name drops what follows a dot and trailing digits, so "python3.12",
# "pip3" and "mkfs.ext4" are found as python, pip and mkfs. It is used for
# privileged programs, interpreters and package managers, whose names carry
# versions; the other lists are matched exactly.
program_in(program, list) if program in list

program_in(program, list) if program_base(program) in list

program_base(program) := trim_right(split(program, ".")[0], "0123456789")

# operands are the command's operands as the parser found them: the words
# that are neither options nor option values, as the program's spec says
# ("git -C dir status" gives ["status"]); for a document without them,
# the args that do not start with "-".
operands(cmd) := cmd.operands if {
	is_array(cmd.operands)
} else := [a |
	some a in cmd.args
	not startswith(a, "-")
]

# invokes is true when the operands start with one of the phrases, of one
# or two words: "pip install" matches ["pip", "install", "x"]. The phrase ""
# matches a bare command (no operands), "*" any invocation, and "word *"
# the word followed by at least one operand ("init *" matches
# ["init", "vite"], not ["init"]).
invokes(_, phrases) if "*" in phrases

invokes(ops, phrases) if {
	count(ops) == 0
	"" in phrases
}

invokes(ops, phrases) if ops[0] in phrases

invokes(ops, phrases) if concat(" ", array.slice(ops, 0, 2)) in phrases

invokes(ops, phrases) if {
	count(ops) > 1
	sprintf("%s *", [ops[0]]) in phrases
}

# package_invocations are the commands that run a package manager with one
# of the subcommands cfg.package_subcommands lists for it, directly or as a
# module of an interpreter ("python -m pip install x").
package_invocations contains cmd.raw if {
	some cmd in commands
	phrases := package_phrases(cmd.program)
	invokes(operands(cmd), phrases)
	not runs_local_bin(cmd)
}

package_invocations contains cmd.raw if {
	some cmd in commands
	some i, "-m" in cmd.args
	program_in(cmd.program, cfg.interpreters)
	phrases := package_phrases(cmd.args[i + 1])
	invokes([a | some a in array.slice(cmd.args, i + 2, count(cmd.args)); not startswith(a, "-")], phrases)
}

# package_phrases are the subcommand phrases (one or two words, "" or "*")
# that cfg.package_subcommands lists
# for a program, or for its base name (pip3.12 is pip).
package_phrases(program) := phrases if {
	phrases := cfg.package_subcommands[program]
} else := cfg.package_subcommands[program_base(program)]

# network is true for a program that talks to the network whatever its
# arguments, matched by family: the program or its base name is in
# cfg.network_programs (nc.openbsd and nc.traditional are nc, wget2 is
# wget, ping6 is ping); or for a subcommand of cfg.network_subcommands
# (openssl s_client). A runner of packages that runs a program already in
# the vault (runs_local_bin: npx eslint with node_modules/.bin/eslint) is
# not one.
network(cmd) if {
	program_in(cmd.program, cfg.network_programs)
	not runs_local_bin(cmd)
}

network(cmd) if invokes(operands(cmd), cfg.network_subcommands[cmd.program])

# runs_local_bin is true for a command of a runner of packages
# (cfg.local_bin_runners: npx NAME, npm exec NAME) that runs a program
# already in the vault: avfs found NAME in a node_modules/.bin of the
# vault, as npx looks for it, and nothing before NAME could make npx
# fetch (input local_bin, docs/input.md). Such a run fetches nothing.
runs_local_bin(cmd) if {
	cmd.program in cfg.local_bin_runners
	is_string(cmd.local_bin)
	cmd.local_bin != ""
}

# listens is true for a command that starts a server: a program of
# cfg.server_programs, an interpreter given one of the options
# cfg.server_options lists for it (php -S), or running one of the modules
# cfg.server_modules lists for it (python -m http.server). Interpreters
# are found by base name (python3.12 is python).
listens(cmd) if cmd.program in cfg.server_programs

listens(cmd) if option_given(cmd, cfg.server_options[program_base(cmd.program)])

listens(cmd) if {
	some i, "-m" in cmd.args
	cmd.args[i + 1] in cfg.server_modules[program_base(cmd.program)]
}

# runs_hidden_command is true for a command given a command line in an
# option (sort --compress-program, tar --to-command) or a subcommand
# (git submodule foreach) that the parser does not take apart: what runs
# is not among the commands the rules see.
runs_hidden_command(cmd) if option_given(cmd, cfg.command_options[cmd.program])

runs_hidden_command(cmd) if invokes(operands(cmd), cfg.command_subcommands[cmd.program])

# dynamic_command is true for the command at index i when its program word
# is not literal, or when it is a shell (-c) or eval-like builtin given code
# in such a word. The carrier of a parsed sh -c script is judged by the
# script's commands instead; literal nested scripts and eval strings are
# parsed, and their commands judged, too.
dynamic_command(_, cmd) if {
	cmd.dynamic == true
	dynamic_word(cmd.argv[0])
}

dynamic_command(i, cmd) if {
	cmd.dynamic == true
	cmd.program in cfg.shells
	"-c" in cmd.flags
	not carrier(i, cmd)
	some a in cmd.args
	dynamic_word(a)
}

dynamic_command(_, cmd) if {
	cmd.dynamic == true
	cmd.program in cfg.evaluators
	some a in cmd.args
	dynamic_word(a)
}

# dynamic_word is true for a word of a dynamic command that holds the
# source text of a variable or a substitution rather than a literal, or a
# pattern the shell expands: a glob (/usr/bin/wge?) or a brace expansion
# that was not expanded.
dynamic_word(w) if contains(w, "$")

dynamic_word(w) if contains(w, "`")

dynamic_word(w) if regex.match(`[*?]|\[.*\]|\{.*(,|\.\.).*\}`, w)

# privileged is true when the program or any wrapper around it (sudo, doas …)
# changes privileges or administers the host.
privileged(cmd) if program_in(cmd.program, cfg.privileged_programs)

# A program that only reads unless given an option of
# cfg.privileged_options (sysctl -w), or an operand name=value when it is
# in cfg.privileged_setters (sysctl kernel.x=1), changes the host then.
privileged(cmd) if option_given(cmd, cfg.privileged_options[cmd.program])

privileged(cmd) if {
	cmd.program in cfg.privileged_setters
	some operand in operands(cmd)
	contains(operand, "=")
}

privileged(cmd) if {
	some w in cmd.wrappers
	program_in(w.name, cfg.privileged_programs)
}

# sandboxed is true when the command runs in the sandbox's namespaces
# (input.sandbox.mode): only then is a path scratch or read_only_system. A
# document without input.sandbox counts as one without a sandbox.
sandboxed if input.sandbox.mode == "namespaces"

# where is what an entry of input.paths names, as the rules take it:
# scratch, read_only_system or unknown (a path only known at run time)
# only in a sandbox and outside the vault;
# vault only when inside_vault is true and where, if given, agrees; outside
# otherwise (unknown, an inconsistent entry, or a document from before
# where existed that is not inside the vault). A where that is missing or
# "" is not given.
where(p) := p.where if {
	sandboxed
	p.where in {"scratch", "read_only_system", "unknown"}
	p.inside_vault == false
} else := "vault" if {
	p.inside_vault == true
	object.get(p, "where", "") in {"", "vault"}
} else := "outside"

# view_kinds are the kinds of path the command may name: the vault, and the
# sandbox's scratch and read-only system (writes to the latter are judged
# by avfs.deny.read_only_system), and in a sandbox a path only known at
# run time: whatever it turns out to be, it is one of the others, since
# the sandbox shows nothing else (it is a change: see changes).
view_kinds := {"vault", "scratch", "read_only_system", "unknown"}

# allowed_path is true for an entry of input.paths in the command's view
# (view_kinds) or on a harmless device.
allowed_path(p) if where(p) in view_kinds

allowed_path(p) if host_path_allowed(p.path)

# writes_path is true for an entry of input.paths that its command writes,
# as far as the parser can tell: the target of a writing redirect, or a
# word its program's spec gives the role write (rm's operands, cp's
# destination, sort -o's value, sed -i's files, dd of=, curl -o …; see
# data.avfs.programs). Other writes are not seen here: in a sandbox they
# fail on the read-only system.
writes_path(p) if {
	p.source == "redirect"
	some r in redirects
	r.target == p.arg
	write_redirect(r)
}

writes_path(p) if {
	p.source == "arg"
	p.role == "write"
}

# host_path_allowed is true for host paths that are harmless devices (/dev/null …).
host_path_allowed(path) if path in cfg.host_paths_allowed

host_path_allowed(path) if strings.any_prefix_match(path, cfg.host_path_prefixes_allowed)

# device is true for a path naming a device other than the harmless ones.
device(path) if {
	some prefix in cfg.device_prefixes
	startswith(path, prefix)
	not host_path_allowed(path)
}

# carrier is true for the top-level shell whose -c script was parsed into
# input.script: its own commands are judged instead of it. Only index 0 can
# be a carrier, so a nested "sh -c $X" is never taken as harmless.
carrier(0, cmd) if {
	cmd.origin == "argv"
	cmd.program in cfg.shells
	"-c" in cmd.flags
	input.script.parse_error == ""
}

# runs_code is true for a program that executes code given to it: shells
# (other than the carrier), interpreters and eval-like builtins.
runs_code(i, cmd) if {
	cmd.program in cfg.shells
	not carrier(i, cmd)
}

runs_code(_, cmd) if program_in(cmd.program, cfg.interpreters)

runs_code(_, cmd) if cmd.program in cfg.evaluators

# Build tools run the recipes of the files they read (make -f FILE).
runs_code(_, cmd) if cmd.program in cfg.build_runners

# pipes_to_shell is true when a script pipes into a shell or an interpreter
# that reads its program from stdin.
pipes_to_shell if input.script.pipes_to_shell

pipes_to_shell if {
	some cmd in commands
	cmd.reads_stdin_script
	cmd.pipeline > 0
}

# redirects are the redirects of every command and of the script.
redirects contains r if {
	some cmd in commands
	some r in cmd.redirects
}

redirects contains r if some r in input.script.redirects

# write_redirect is true for a redirect that writes a file (">", ">>", "&>",
# "&>>", "2>", ">|", "<>", ">&file", and each through a descriptor named by
# a variable: "{fd}>"); duplicating a descriptor ("2>&1") and writing
# to a harmless device ("2>/dev/null") are not writes.
write_redirect(r) if {
	regex.match(`^([0-9]*|\{[A-Za-z_][A-Za-z0-9_]*\})(>|>>|>\||&>|&>>|<>|>&)$`, r.op)
	not fd_duplication(r)
	not harmless_target(r)
}

harmless_target(r) if host_path_allowed(r.target)

fd_duplication(r) if {
	endswith(r.op, ">&")
	regex.match(`^([0-9]+-?|-)$`, r.target)
}

# read_only is true for a command known not to change anything: a program in
# cfg.read_only_programs without any of its writing options, or a git
# subcommand that only reads.
read_only(cmd) if {
	cmd.program in cfg.read_only_programs
	not vault_program(cmd)
	not read_only_exception(cmd)
	not unsafe_assignment(cmd)
	code_read_only(cmd)
}

read_only(cmd) if {
	cmd.program == "git"
	not vault_program(cmd)
	invokes(operands(cmd), cfg.git_read_only_subcommands)
	not read_only_exception(cmd)
	not unsafe_assignment(cmd)
}

# git branch lists branches when it has no operand and only listing flags
# (with their values: --contains abc, --sort=-committerdate).
read_only(cmd) if {
	cmd.program == "git"
	not vault_program(cmd)
	operands(cmd) == ["branch"]
	some i, "branch" in cmd.args
	every j, a in array.slice(cmd.args, i + 1, count(cmd.args)) {
		branch_listing_word(cmd, array.slice(cmd.args, i + 1, count(cmd.args)), j, a)
	}
	not read_only_exception(cmd)
	not unsafe_assignment(cmd)
}

branch_listing_word(_, _, _, a) if split(a, "=")[0] in cfg.git_branch_listing_flags

branch_listing_word(cmd, words, j, a) if {
	flag := words[j - 1]
	flag in cfg.git_branch_listing_flags
	cmd.flag_values[flag] == a
}

# code_read_only is true when every word of program text the command is
# given (input command.code: sed's script, awk's program, jq's filter)
# matches one of the patterns cfg.read_only_code lists for its program, if
# it lists any, and none of those cfg.unsafe_code lists: sed -n '/re/p'
# only prints, sed 'w /etc/x' writes a file, awk 'system("…")' runs one.
code_read_only(cmd) if {
	every c in object.get(cmd, "code", []) {
		code_allowed(cmd.program, c)
		not code_unsafe(cmd.program, c)
	}
}

code_allowed(program, _) if not cfg.read_only_code[program]

code_allowed(program, c) if {
	some pattern in cfg.read_only_code[program]
	regex.match(pattern, c)
}

code_unsafe(program, c) if {
	some pattern in cfg.unsafe_code[program]
	regex.match(pattern, c)
}

# A shell given literal code (sh -c 'ls') and eval of literal words run
# only the commands parsed from them, which are judged themselves.
read_only(cmd) if {
	cmd.program in cfg.shells
	"-c" in cmd.flags
	cmd.dynamic == false
	not unsafe_assignment(cmd)
}

read_only(cmd) if {
	cmd.program == "eval"
	cmd.dynamic == false
	not unsafe_assignment(cmd)
}

# A statement with only assignments or redirections runs no program: its
# redirections are judged as redirects (see changes), its assignments as a
# command's are.
read_only(cmd) if {
	empty_command(cmd)
	not unsafe_assignment(cmd)
}

# read_only_exception is true when an argument of the command starts with one
# of the prefixes cfg.read_only_unless_args lists for its program (date -s,
# sysctl -w …).
read_only_exception(cmd) if option_given(cmd, cfg.read_only_unless_args[cmd.program])

# option_given is true when the command is given one of options: an
# argument or flag starts with it ("-o", "-ofile", "--output=f"). For a
# program whose spec allows abbreviations the parser records a long option
# under its full name ("date --se=x" is --set: GNU getopt_long takes any
# unambiguous prefix), so the flags hold it.
option_given(cmd, options) if strings.any_prefix_match(array.concat(cmd.args, cmd.flags), options)

unsafe_assignment(cmd) if strings.any_prefix_match(object.keys(cmd.assignments), cfg.unsafe_assignment_prefixes)

# vault_program is true when the program is a file of the vault, named by a
# relative path (./cat, bin/ls): whatever its name, it is not read-only.
vault_program(cmd) if {
	contains(cmd.argv[0], "/")
	not startswith(cmd.argv[0], "/")
}

# changes describes what may change the vault: every command that is not
# read-only (the carrier aside), every command that writes or runs a path
# (role write or execute) other than scratch, every writing redirect that
# does not only write scratch, and in a sandbox every path only known at
# run time. The input is read-only when it is empty. A malformed input is denied anyway: it is not
# looked at here, so that no rule trips over a missing field.
changes contains cmd.raw if {
	not malformed
	some i, cmd in commands
	not read_only(cmd)
	not carrier(i, cmd)
}

changes contains commands[p.command].raw if {
	not malformed
	some p in input.paths
	p.source == "arg"
	p.role in {"write", "execute"}
	where(p) != "scratch"
}

changes contains p.arg if {
	not malformed
	some p in input.paths
	where(p) == "unknown"
}

changes contains sprintf("%s %s", [r.op, r.target]) if {
	not malformed
	some r in redirects
	write_redirect(r)
	not scratch_target(r)
}

# scratch_target is true for a redirect whose target is scratch wherever
# the script names it: what is written there never reaches the vault (or
# the host).
scratch_target(r) if {
	entries := [p | some p in input.paths; p.source == "redirect"; p.arg == r.target]
	count(entries) > 0
	every p in entries {
		where(p) == "scratch"
	}
}
