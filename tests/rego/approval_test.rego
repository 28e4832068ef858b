package avfs.rules.approval_test

import data.avfs.testing as t

# --- avfs.approval.network --------------------------------------------------

test_network_programs if {
	every argv in [
		["curl", "https://example.com"],
		["wget", "https://example.com/f.tgz"],
		["ssh", "host", "ls"],
		["scp", "f", "host:/tmp"],
		["sftp", "host"],
		["nc", "-l", "4444"],
		["telnet", "host", "25"],
		["ftp", "host"],
		["gh", "pr", "list"],
		["/usr/bin/curl", "-O", "https://example.com/x"],
		["npx", "cowsay", "hi"],
		["host", "example.com"],
		["ssh-keyscan", "github.com"],
		["httpie", "cli", "plugins", "list"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.network" in t.ids(inp)
	}
}

# Network programs are matched by family: a base name in the list (what
# precedes a dot, without trailing digits) is enough.
test_network_program_families if {
	every argv in [
		["nc.openbsd", "example.com", "80"],
		["nc.traditional", "-l", "4444"],
		["/usr/bin/nc.openbsd", "-z", "host", "22"],
		["wget2", "https://example.com/f"],
		["ping6", "::1"],
		["ncat", "example.com", "443"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.network" in t.ids(inp)
	}
}

test_network_subcommands if {
	every argv in [
		["openssl", "s_client", "-connect", "example.com:443"],
		["openssl", "s_server", "-accept", "4433"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.network" in t.ids(inp)
	}
	every argv in [["openssl", "sha256", "f"], ["openssl", "req", "-new"], ["openssl", "version"]] {
		not "avfs.approval.network" in t.ids(t.argv_input(argv))
	}
}

test_network_behind_wrappers if {
	every wrappers in [[["env", "A=1"]], [["timeout", "10"]], [["busybox"]], [["nice"], ["nohup"]]] {
		inp := t.doc([t.wrapped(wrappers, ["wget", "https://example.com"])], null, [])
		t.decision_of(inp) == "require_approval"
		"avfs.approval.network" in t.ids(inp)
	}
}

test_network_inside_sh_c if {
	inner := t.in_script([t.cmd(["ls"]), t.cmd(["curl", "-s", "https://example.com"])])
	inp := t.sh_c("ls && curl -s https://example.com", inner, {})
	t.decision_of(inp) == "require_approval"
	r := t.result(inp)
	{
		"id": "avfs.approval.network",
		"decision": "require_approval",
		"message": "Network programs need approval: curl -s https://example.com",
	} in r.reasons
	count(r.reasons) == 1
}

test_not_network if {
	every argv in [["ls"], ["curlie-local"], ["make", "curl"], ["echo", "wget"], ["ssh-keygen", "-t", "ed25519"], ["hostname"]] {
		not "avfs.approval.network" in t.ids(t.argv_input(argv))
	}
}

# --- avfs.approval.remote_sync ----------------------------------------------

test_rsync_remote if {
	every argv in [
		["rsync", "-a", "src/", "host:/backup"],
		["rsync", "-avz", "user@host:data/", "data/"],
		["rsync", "host::module/x", "."],
		["rsync", "rsync://host/module", "."],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.remote_sync" in t.ids(inp)
	}
}

test_rsync_local if {
	inp := t.argv_input(["rsync", "-a", "--delete", "src/", "dst/"])
	not "avfs.approval.remote_sync" in t.ids(inp)
	t.decision_of(inp) == "allow_with_checkpoint"
}

# --- avfs.approval.git_remote -----------------------------------------------

test_git_remote if {
	every argv in [
		["git", "clone", "https://example.com/r.git"],
		["git", "fetch", "--all"],
		["git", "pull", "--rebase"],
		["git", "push", "origin", "main"],
		["git", "ls-remote", "origin"],
		["git", "submodule", "update", "--init"],
		["/usr/bin/git", "--no-pager", "pull"],
		["git", "remote", "update"],
		["git", "lfs", "fetch"],
		["git", "lfs", "pull"],
		["git", "lfs", "push", "origin", "main"],
		["git", "lfs", "clone", "https://example.com/r.git"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.git_remote" in t.ids(inp)
	}
}

test_git_remote_in_script if {
	inner := t.in_script([t.cmd(["git", "add", "-A"]), t.cmd(["git", "commit", "-m", "x"]), t.cmd(["git", "push"])])
	inp := t.sh_c("git add -A && git commit -m x && git push", inner, {})
	t.decision_of(inp) == "require_approval"
	t.ids(inp) == {"avfs.approval.git_remote"}
}

test_git_local if {
	every argv in [["git", "status"], ["git", "commit", "-m", "fetch"], ["git", "submodule", "status"], ["git", "lfs", "ls-files"], ["git", "remote", "-v"]] {
		not "avfs.approval.git_remote" in t.ids(t.argv_input(argv))
	}
}

# --- avfs.approval.packages -------------------------------------------------

test_package_installs if {
	every argv in [
		["npm", "install"],
		["npm", "i", "left-pad"],
		["npm", "ci"],
		["npm", "publish"],
		["pnpm", "add", "react"],
		["yarn"],
		["yarn", "add", "lodash"],
		["bun", "install"],
		["pip", "install", "requests"],
		["pip3", "install", "-r", "requirements.txt"],
		["uv", "pip", "install", "x"],
		["uv", "add", "httpx"],
		["poetry", "install"],
		["cargo", "install", "ripgrep"],
		["cargo", "add", "serde"],
		["cargo", "publish"],
		["go", "get", "example.com/m@latest"],
		["go", "install", "example.com/cmd@latest"],
		["gem", "install", "rails"],
		["apt-get", "install", "-y", "jq"],
		["apt", "update"],
		["apt-get", "download", "curl"],
		["npm", "create", "vite@latest", "app"],
		["npm", "x", "cowsay"],
		["npm", "init", "react-app", "app"],
		["npm", "audit"],
		["pnpm", "up"],
		["pnpm", "dlx", "create-vite"],
		["yarn", "dlx", "create-next-app"],
		["pip", "download", "requests"],
		["pip", "wheel", "-r", "requirements.txt"],
		["go", "mod", "download"],
		["cargo", "fetch"],
		["cargo", "update"],
		["gem", "fetch", "rails"],
		["conda", "install", "numpy"],
		["conda", "create", "-n", "env"],
		["mamba", "env", "create", "-f", "env.yml"],
		["docker", "image", "pull", "alpine"],
		["docker", "container", "run", "alpine"],
		["docker", "buildx", "build", "."],
		["podman", "image", "pull", "alpine"],
		["brew", "install", "jq"],
		["docker", "pull", "alpine"],
		["docker", "push", "me/img"],
		["docker", "run", "--rm", "alpine"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.packages" in t.ids(inp)
	}
}

test_python_module_installs if {
	every argv in [
		["python", "-m", "pip", "install", "requests"],
		["python3", "-m", "pip", "install", "--user", "x"],
		["/usr/bin/python3.12", "-m", "pip", "install", "x"],
		["pip3.12", "install", "x"],
		["pypy3", "-m", "pip", "install", "x"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.packages" in t.ids(inp)
	}
}

test_package_install_in_sh_c_behind_wrapper if {
	inner := t.in_script([t.cmd(["cd", "web"]), t.wrapped([["env", "CI=1"]], ["npm", "ci"])])
	inp := t.sh_c("cd web && env CI=1 npm ci", inner, {})
	t.decision_of(inp) == "require_approval"
	"avfs.approval.packages" in t.ids(inp)
}

test_package_commands_that_stay_local if {
	every argv in [
		["npm", "test"],
		["npm", "run", "build"],
		["yarn", "test"],
		["pip", "list"],
		["cargo", "build"],
		["go", "build", "./..."],
		["go", "test", "./..."],
		["docker", "ps"],
		["python", "-m", "pytest"],
		["python", "-m", "venv", ".venv"],
		["python", "-m"],
		["npm", "init"],
		["npm", "init", "-y"],
		["conda", "list"],
		["cargo", "test"],
		["docker", "image", "ls"],
	] {
		inp := t.argv_input(argv)
		not "avfs.approval.packages" in t.ids(inp)
		t.decision_of(inp) == "allow_with_checkpoint"
	}
}

# --- avfs.approval.dynamic_command ------------------------------------------

test_dynamic_programs if {
	every argv in [["$x", "http://example.com"], ["$(printf curl)", "x"], ["`echo sudo`", "ls"], ["\"$HOME/../usr/bin/curl\"", "x"], ["${CC:-gcc}", "-o", "x", "x.c"]] {
		inp := t.sh_c("…", t.in_script([object.union(t.cmd(argv), {"program": argv[0], "dynamic": true})]), {})
		t.decision_of(inp) == "require_approval"
		"avfs.approval.dynamic_command" in t.ids(inp)
	}
}

test_pattern_programs if {
	# A glob or a brace expansion the parser did not resolve names a
	# program known only at run time.
	every argv in [["/usr/bin/wge?", "x"], ["*.sh"], ["/bin/[c]url", "x"], ["{wget,-q,x}"], ["{a..z}"]] {
		inp := t.sh_c("…", t.in_script([object.union(t.cmd(argv), {"program": argv[0], "dynamic": true})]), {})
		"avfs.approval.dynamic_command" in t.ids(inp)
	}

	# The test builtin [ is no pattern.
	inp := t.sh_c("…", t.in_script([object.union(t.cmd(["[", "-f", "$x", "]"]), {"dynamic": true})]), {})
	not "avfs.approval.dynamic_command" in t.ids(inp)
}

test_literal_programs if {
	# Dynamic arguments are judged as paths; the program is known.
	inp := t.sh_c("ls $(pwd)", t.in_script([object.union(t.cmd(["ls", "$(pwd)"]), {"dynamic": true}), t.with_fields(["pwd"], {"origin": "substitution"})]), {})
	not "avfs.approval.dynamic_command" in t.ids(inp)
	not "avfs.approval.dynamic_command" in t.ids(t.argv_input(["make", "$x"]))
}

test_dynamic_code if {
	every argv in [["sh", "-c", "$x"], ["bash", "-ec", "`cat cmd`"], ["eval", "echo $x"], ["source", "$f"], [".", "$HOME/.profile"]] {
		inp := t.sh_c("…", t.in_script([object.union(t.cmd(argv), {"dynamic": true})]), {})
		t.decision_of(inp) == "require_approval"
		"avfs.approval.dynamic_command" in t.ids(inp)
	}
}

test_literal_code if {
	every argv in [["sh", "run.sh", "$x"], ["eval", "echo hi"], ["python3", "-c", "$x"]] {
		inp := t.sh_c("…", t.in_script([object.union(t.cmd(argv), {"dynamic": true})]), {})
		not "avfs.approval.dynamic_command" in t.ids(inp)
	}

	# Literal words that hold a $ (sh -c 'echo $HOME', eval 'echo $x') are
	# parsed scripts, not dynamic ones.
	every argv in [["sh", "-c", "echo $HOME"], ["eval", "echo $x"], ["$literal"]] {
		inp := t.sh_c("…", t.in_script([object.union(t.cmd(argv), {"dynamic": false})]), {})
		not "avfs.approval.dynamic_command" in t.ids(inp)
	}
}

# --- avfs.approval.listen ---------------------------------------------------

test_listening_servers if {
	every argv in [
		["python3", "-m", "http.server", "8000"],
		["python3.12", "-m", "http.server", "--bind", "0.0.0.0"],
		["python", "-m", "SimpleHTTPServer"],
		["php", "-S", "0.0.0.0:8080"],
		["php", "-S0.0.0.0:8080"],
		["ruby", "-run", "-e", "httpd", "."],
		["http-server", "-p", "8080"],
		["nginx", "-g", "daemon off;"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.listen" in t.ids(inp)
	}
	bb := t.doc([t.wrapped([["busybox"]], ["httpd", "-f", "-p", "8080"])], null, [])
	"avfs.approval.listen" in t.ids(bb)
}

test_listening_server_gets_host_network_when_approved if {
	r := t.result(t.approved(t.argv_input(["python3", "-m", "http.server"]), "ap-1"))
	r.sandbox == {"network": "host"}
}

test_not_listening if {
	every argv in [
		["python3", "-m", "pytest"],
		["python3", "-m", "json.tool", "f"],
		["python3", "-m"],
		["php", "artisan", "migrate"],
		["ruby", "script.rb"],
		["node", "-m", "http.server"],
	] {
		not "avfs.approval.listen" in t.ids(t.argv_input(argv))
	}
}

# --- avfs.approval.hidden_command -------------------------------------------

test_hidden_commands if {
	every argv in [
		["tar", "--checkpoint=1", "--checkpoint-action=exec=sh", "-cf", "a.tar", "src"],
		["git", "submodule", "foreach", "git reset --hard"],
		["git", "bisect", "run", "make", "test"],
	] {
		inp := t.argv_input(argv)
		t.decision_of(inp) == "require_approval"
		"avfs.approval.hidden_command" in t.ids(inp)
	}
}

test_not_hidden_commands if {
	every argv in [
		["sort", "-c", "f"],
		["sort", "--check", "f"],
		["tar", "--checkpoint=10", "-cf", "a.tar", "src"],
		["tar", "--to-stdout", "-xf", "a.tar"],
		["tar", "-czf", "a.tar.gz", "src"],
		["git", "submodule", "status"],
		["git", "bisect", "start"],
		["rg", "-n", "x"],
	] {
		not "avfs.approval.hidden_command" in t.ids(t.argv_input(argv))
	}
}
