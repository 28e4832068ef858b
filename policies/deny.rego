# METADATA
# title: Deny rules
# description: |
#   What never runs: privilege changes, raw devices, paths outside the vault,
#   writes to the sandbox's read-only system, downloaded code being
#   executed, scripts that cannot be parsed, fork bombs.
package avfs.rules.deny

import data.avfs.lib

# METADATA
# title: Input documents that are not well formed are denied
# description: |
#   The input must be shaped like wire.Input (every field the rules read
#   present with its type); what cannot be read cannot be judged.
# custom:
#   id: avfs.deny.malformed_input
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), "") if lib.malformed

# METADATA
# title: Changing privileges or administering the host is denied
# description: |
#   Programs in privileged_programs (sudo, su, mount, mkfs*, systemctl …)
#   are denied whether they run directly, inside a script, or as a wrapper
#   around another command (sudo ls).
# custom:
#   id: avfs.deny.privileged
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in lib.commands
	lib.privileged(cmd)
}

# METADATA
# title: Writing to a raw device is denied
# description: dd of=/dev/sda, or a redirect into a device, other than the harmless ones (/dev/null …).
# custom:
#   id: avfs.deny.raw_device
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), target) if {
	some target in device_writes
}

# device_writes are the devices written by dd of=… or by a redirect.
device_writes contains target if {
	some cmd in lib.commands
	cmd.program == "dd"
	some arg in cmd.args
	startswith(arg, "of=")
	target := substring(arg, 3, -1)
	lib.device(target)
}

device_writes contains r.target if {
	some r in lib.redirects
	lib.write_redirect(r)
	lib.device(r.target)
}

# METADATA
# title: Paths outside the vault are denied
# description: |
#   Any path argument or redirect target outside the command's view: not
#   the vault, nor, in a sandbox, its scratch (/tmp, its home, /dev, /proc)
#   or read-only system (/usr, /etc …). That is every absolute host path,
#   ~ and $HOME without a sandbox, ~user, .. escapes and paths known only
#   at run time, except host_paths_allowed.
# custom:
#   id: avfs.deny.outside_vault
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), p.arg) if {
	some p in input.paths
	not lib.allowed_path(p)
}

# METADATA
# title: Writing to the read-only system is denied
# description: |
#   In a sandbox the system (/usr, /bin, /etc …) is read-only: reading it is
#   allowed, a write the tables see (a writing redirect, rm, cp's
#   destination, sed -i, dd of= … see lib.writes_path) is denied rather
#   than left to fail.
# custom:
#   id: avfs.deny.read_only_system
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), p.arg) if {
	some p in input.paths
	lib.where(p) == "read_only_system"
	lib.writes_path(p)
}

# METADATA
# title: Piping downloaded code into a shell is denied
# description: |
#   curl … | sh, wget -O- … | bash, curl … | python -, and a network
#   program writing into a process substitution that runs it
#   (curl … > >(sh), curl … | tee >(sh)).
# custom:
#   id: avfs.deny.pipe_to_shell
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), raw) if {
	lib.pipes_to_shell
	some raw in piped_downloads
}

# piped_downloads are the network commands whose output another command
# reads: through a pipeline, or a process substitution >(…) they write to.
piped_downloads contains cmd.raw if {
	some cmd in lib.commands
	cmd.pipeline_len > 1
	lib.network(cmd)
}

piped_downloads contains cmd.raw if {
	some cmd in lib.commands
	lib.network(cmd)
	writes_process_substitution(cmd)
}

writes_process_substitution(cmd) if {
	some r in cmd.redirects
	startswith(r.target, ">(")
}

writes_process_substitution(cmd) if {
	some a in cmd.args
	contains(a, ">(")
}

# METADATA
# title: Running downloaded code is denied
# description: |
#   A network program in a substitution whose output a shell, an
#   interpreter, a build tool or eval runs: the substitution is in that
#   command's words or redirections (bash <(curl …), python -c "$(curl
#   …)", eval "$(wget -O- …)", bash < <(curl …), make -f <(curl …)), or the
#   runner's code is itself not known (sh -c "$v", eval "$v", a shell
#   reading a pipe whose text is not literal: echo "$(curl …)" | sh). A
#   download that only feeds an assignment or an argument (v=$(curl …);
#   python3 build.py "$v") is not run as code.
# custom:
#   id: avfs.deny.download_exec
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), runner.raw) if {
	some net in lib.commands
	net.origin == "substitution"
	lib.network(net)
	some i, runner in lib.commands
	runner.origin != "substitution"
	lib.runs_code(i, runner)
	runs_output(net, i, runner)
}

# runs_output is true when runner (at index i) runs what net prints: net
# feeds it, or the runner's code is not known (see unknown_code).
runs_output(net, i, _) if object.get(net, "feeds", -1) == i

runs_output(_, _, runner) if unknown_code(runner)

# unknown_code is true for a shell or eval given code that is not literal
# (sh -c "$v", eval "$v"), and for a shell or interpreter reading its
# program from a pipe whose text the parser did not know.
unknown_code(runner) if {
	runner.dynamic == true
	some w in array.concat(lib.cfg.shells, lib.cfg.evaluators)
	runner.program == w
}

unknown_code(runner) if {
	runner.reads_stdin_script
	runner.pipeline > 0
	input.script.pipes_to_shell
}

# METADATA
# title: Running downloaded code is denied
# description: |
#   A file a network program writes (curl -o f, wget -O f, curl … > f),
#   run by the same input as code: sh f, python f, make -f f, ./f, . f —
#   the file itself or one under a directory it writes (wget -P dir).
# custom:
#   id: avfs.deny.download_exec
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), run.arg) if {
	some saved in input.paths
	saved.role == "write"
	lib.network(lib.commands[saved.command])
	some run in input.paths
	run.role == "execute"
	under(run.path, saved.path)
}

# under is true when path is dir or below it.
under(path, path)

under(path, dir) if startswith(path, concat("", [trim_suffix(dir, "/"), "/"]))

# METADATA
# title: Shell scripts that cannot be parsed are denied
# description: What cannot be parsed cannot be judged.
# custom:
#   id: avfs.deny.unparsable_script
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), input.script.parse_error) if {
	input.script.parse_error != ""
}

# METADATA
# title: Fork bombs are denied
# description: |
#   A function defined by the script that is piped into itself
#   (:(){ :|:& };:), whose body calls itself in the background
#   (:(){ :& :; };:, bomb(){ bomb & }) or calls itself twice
#   (f(){ f; f; }): each call starts more of them.
# custom:
#   id: avfs.deny.fork_bomb
#   decision: deny
reasons contains lib.reason(rego.metadata.rule(), name) if {
	some name in fork_bombs
}

# fork_bombs are the functions of the script that multiply when called.
fork_bombs contains name if {
	some name in input.script.functions
	some a in lib.commands
	a.program == name
	a.pipeline_len > 1
	some b in lib.commands
	b.program == name
	b.pipeline != a.pipeline
}

fork_bombs contains name if {
	some name in input.script.functions
	some cmd in self_calls(name)
	cmd.background == true
}

fork_bombs contains name if {
	some name in input.script.functions
	count(self_calls(name)) > 1
}

# self_calls are the commands of the body of the function name that call it.
self_calls(name) := [cmd |
	some cmd in lib.commands
	object.get(cmd, "function", "") == name
	cmd.program == name
]
