# METADATA
# title: Approval rules
# description: |
#   What a person approves first: anything that reaches the network, wherever
#   it appears (inside sh -c, behind wrappers, by absolute path, via busybox).
package avfs.rules.approval

import data.avfs.lib

# METADATA
# title: Network programs need approval
# description: curl, wget, ssh, scp, nc, gh … (network_programs), whatever their arguments.
# custom:
#   id: avfs.approval.network
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in lib.commands
	lib.network(cmd)
}

# METADATA
# title: Copying to or from a remote host needs approval
# description: rsync with a host:path, host::module or rsync:// operand.
# custom:
#   id: avfs.approval.remote_sync
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in lib.commands
	cmd.program in lib.cfg.remote_sync_programs
	some operand in lib.operands(cmd)
	regex.match(`^[^/:]+:`, operand)
}

# METADATA
# title: Git commands that reach a remote need approval
# description: git clone, fetch, pull, push, ls-remote, submodule update … (git_network_subcommands).
# custom:
#   id: avfs.approval.git_remote
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in lib.commands
	cmd.program == "git"
	lib.invokes(lib.operands(cmd), lib.cfg.git_network_subcommands)
}

# METADATA
# title: Installing or publishing packages and images needs approval
# description: |
#   npm install, pip install, uv pip install, python -m pip install, cargo
#   add, go get, gem install, apt, brew, docker pull … (package_subcommands).
# custom:
#   id: avfs.approval.packages
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), raw) if {
	some raw in lib.package_invocations
}

# METADATA
# title: Commands known only at run time need approval
# description: |
#   A program named by a variable or a substitution ($x, $(printf curl),
#   "$HOME/bin/tool"), or shell code given to sh -c, eval or source in such
#   a word (sh -c "$x", eval "$cmd"), cannot be judged by name: no other rule
#   sees what runs.
# custom:
#   id: avfs.approval.dynamic_command
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), cmd.raw) if {
	some i, cmd in lib.commands
	lib.dynamic_command(i, cmd)
}

# METADATA
# title: Servers that listen on the network need approval
# description: |
#   python -m http.server, php -S, busybox httpd, nginx … (server_programs,
#   server_options, server_modules). Approved, the run gets the host's
#   network, so the server is reachable from the host.
# custom:
#   id: avfs.approval.listen
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in lib.commands
	lib.listens(cmd)
}

# METADATA
# title: Commands given in options or subcommands the policy cannot read need approval
# description: |
#   sort --compress-program, tar -I and --to-command, rg --pre, git
#   submodule foreach, git bisect run (command_options,
#   command_subcommands) run a program or shell code that is not among
#   the commands the rules see.
# custom:
#   id: avfs.approval.hidden_command
#   decision: require_approval
reasons contains lib.reason(rego.metadata.rule(), cmd.raw) if {
	some cmd in lib.commands
	lib.runs_hidden_command(cmd)
}
