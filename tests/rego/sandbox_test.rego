package avfs.sandbox_test

import data.avfs.lib
import data.avfs.testing as t

# --- lib.where ---------------------------------------------------------------

test_where_in_a_sandbox if {
	every c in [
		["scratch", t.where_entry("/tmp/x", "/tmp/x", "scratch", "arg")],
		["read_only_system", t.where_entry("/etc/hosts", "/etc/hosts", "read_only_system", "arg")],
		["vault", t.where_entry("/workspace/a", "/a", "vault", "arg")],
		["outside", t.where_entry("/var/x", "/var/x", "outside", "arg")],
		["unknown", t.where_entry("$D/x", "$D/x", "unknown", "arg")],
		# Entries whose inside_vault disagrees with where are outside.
		["outside", object.union(t.where_entry("/tmp/x", "/tmp/x", "scratch", "arg"), {"inside_vault": true})],
		["outside", object.union(t.where_entry("a", "/a", "vault", "arg"), {"inside_vault": false})],
		["outside", object.union(t.where_entry("/var/x", "/var/x", "outside", "arg"), {"inside_vault": true})],
		["outside", object.union(t.where_entry("/tmp/x", "/tmp/x", 7, "arg"), {"inside_vault": false})],
	] {
		lib.where(c[1]) == c[0] with input as t.sandboxed(t.argv_input(["ls"]))
	}
}

test_where_without_a_sandbox if {
	every inp in [
		t.argv_input(["ls"]),
		object.remove(t.argv_input(["ls"]), {"sandbox"}),
		object.union(t.argv_input(["ls"]), {"sandbox": {"mode": "bubblewrap"}}),
	] {
		# Scratch and read_only_system only mean something in a sandbox.
		lib.where(t.where_entry("/tmp/x", "/tmp/x", "scratch", "arg")) == "outside" with input as inp
		lib.where(t.where_entry("/etc/hosts", "/etc/hosts", "read_only_system", "arg")) == "outside" with input as inp
		lib.where(t.where_entry("a", "/a", "vault", "arg")) == "vault" with input as inp
	}
}

test_where_of_entries_without_where if {
	inside := object.remove(t.path_entry("a", "/a", true, "arg"), {"where"})
	outside := object.remove(t.path_entry("/tmp/x", "/tmp/x", false, "arg"), {"where"})
	every inp in [t.argv_input(["ls"]), t.sandboxed(t.argv_input(["ls"]))] {
		lib.where(inside) == "vault" with input as inp
		lib.where(object.union(inside, {"where": ""})) == "vault" with input as inp
		lib.where(outside) == "outside" with input as inp
		lib.where(object.union(outside, {"where": ""})) == "outside" with input as inp
	}
}

# --- paths in the sandbox's view ---------------------------------------------

test_scratch_and_system_reads_are_allowed_in_a_sandbox if {
	every p in [
		t.where_entry("/tmp/x", "/tmp/x", "scratch", "arg"),
		t.where_entry("~/.gitconfig", "~/.gitconfig", "scratch", "arg"),
		t.where_entry("/root/.bashrc", "/root/.bashrc", "scratch", "arg"),
		t.where_entry("/proc/self/status", "/proc/self/status", "scratch", "arg"),
		t.where_entry("/etc/passwd", "/etc/passwd", "read_only_system", "arg"),
		t.where_entry("/usr/share/dict/words", "/usr/share/dict/words", "read_only_system", "arg"),
	] {
		inp := t.sandboxed(t.doc([t.cmd(["cat", p.arg])], null, [p]))
		t.decision_of(inp) == "allow"
		t.ids(inp) == {"avfs.allow.read_only"}
	}
}

test_reading_the_system_into_the_vault if {
	p := [
		t.where_entry("/etc/hosts", "/etc/hosts", "read_only_system", "arg"),
		t.where_entry("hosts", "/hosts", "vault", "arg"),
	]
	inp := t.sandboxed(t.doc([t.cmd(["cp", "/etc/hosts", "hosts"])], null, p))
	t.decision_of(inp) == "allow_with_checkpoint"
	t.ids(inp) == {"avfs.checkpoint.changes"}
}

test_outside_the_view_is_denied_in_a_sandbox if {
	every p in [
		t.where_entry("/var/log/syslog", "/var/log/syslog", "outside", "arg"),
		t.where_entry("/home/u/.ssh/id_rsa", "/home/u/.ssh/id_rsa", "outside", "arg"),
		t.where_entry("~bob/x", "~bob/x", "outside", "arg"),
		t.where_entry("../../x", "/../x", "outside", "arg"),
	] {
		inp := t.sandboxed(t.doc([t.cmd(["cat", p.arg])], null, [p]))
		t.decision_of(inp) == "deny"
		"avfs.deny.outside_vault" in t.ids(inp)
	}
}

# Without a sandbox nothing is scratch or read-only system: what the same
# entries name is denied as before, whatever where says.
test_without_a_sandbox_the_view_is_the_vault_only if {
	every p in [
		t.where_entry("/tmp/x", "/tmp/x", "scratch", "arg"),
		t.where_entry("~/.gitconfig", "~/.gitconfig", "scratch", "arg"),
		t.where_entry("/etc/passwd", "/etc/passwd", "read_only_system", "arg"),
	] {
		every inp in [
			t.doc([t.cmd(["cat", p.arg])], null, [p]),
			object.remove(t.doc([t.cmd(["cat", p.arg])], null, [p]), {"sandbox"}),
		] {
			t.decision_of(inp) == "deny"
			t.ids(inp) == {"avfs.deny.outside_vault"}
		}
	}
}

# --- writes to scratch ---------------------------------------------------------

test_redirect_into_scratch_changes_nothing if {
	every target in ["/tmp/out", "/dev/null", "~/notes"] {
		r := [{"op": ">", "target": target}]
		inner := t.in_script([t.with_fields(["echo", "hi"], {"redirects": r})])
		p := object.union(t.where_entry(target, target, "scratch", "redirect"), {"command": 1})
		inp := t.sandboxed(object.union(t.sh_c("echo hi > x", inner, {"redirects": r}), {"paths": [p]}))
		t.decision_of(inp) == "allow"
		t.ids(inp) == {"avfs.allow.read_only"}
	}
}

test_redirect_into_scratch_without_a_sandbox_is_denied if {
	r := [{"op": ">", "target": "/tmp/out"}]
	inner := t.in_script([t.with_fields(["echo", "hi"], {"redirects": r})])
	p := object.union(t.where_entry("/tmp/out", "/tmp/out", "scratch", "redirect"), {"command": 1})
	inp := object.union(t.sh_c("echo hi > /tmp/out", inner, {"redirects": r}), {"paths": [p]})
	t.decision_of(inp) == "deny"
	"avfs.deny.outside_vault" in t.ids(inp)
	count(lib.changes) == 1 with input as inp
}

# The same target written in the vault and, after cd, in scratch: the vault
# write still needs a checkpoint.
test_redirect_target_in_vault_and_scratch if {
	r := [{"op": ">", "target": "x"}]
	inner := t.in_script([t.with_fields(["echo"], {"redirects": r}), t.with_fields(["echo"], {"redirects": r})])
	paths := [
		object.union(t.where_entry("x", "/x", "vault", "redirect"), {"command": 1}),
		object.union(t.where_entry("x", "/tmp/x", "scratch", "redirect"), {"command": 2}),
	]
	inp := t.sandboxed(object.union(t.sh_c("echo > x; cd /tmp; echo > x", inner, {"redirects": array.concat(r, r)}), {"paths": paths}))
	t.decision_of(inp) == "allow_with_checkpoint"
}

test_raw_device_in_a_sandbox_is_still_denied if {
	r := [{"op": ">", "target": "/dev/sda"}]
	inner := t.in_script([t.with_fields(["echo"], {"redirects": r})])
	p := object.union(t.where_entry("/dev/sda", "/dev/sda", "scratch", "redirect"), {"command": 1})
	inp := t.sandboxed(object.union(t.sh_c("echo > /dev/sda", inner, {"redirects": r}), {"paths": [p]}))
	t.decision_of(inp) == "deny"
	"avfs.deny.raw_device" in t.ids(inp)
}

# --- avfs.deny.read_only_system ------------------------------------------------

ro(arg) := t.where_entry(arg, arg, "read_only_system", "arg")

# ro_written is ro(arg) with the role a program spec gives a word it writes.
ro_written(arg) := object.union(ro(arg), {"role": "write"})

test_writes_to_the_read_only_system if {
	every c in [
		[["rm", "-f", "/usr/bin/python3"], "/usr/bin/python3"],
		[["touch", "/etc/motd"], "/etc/motd"],
		[["chmod", "777", "/usr/local/bin"], "/usr/local/bin"],
		[["mv", "/etc/hosts", "hosts"], "/etc/hosts"],
		[["tee", "-a", "/etc/hosts"], "/etc/hosts"],
		[["cp", "tool", "/usr/local/bin/tool"], "/usr/local/bin/tool"],
		[["ln", "-s", "x", "/usr/bin/x"], "/usr/bin/x"],
		[["sed", "-i", "s/a/b/", "/etc/hosts"], "/etc/hosts"],
		[["sed", "--in-place", "s/a/b/", "/etc/hosts"], "/etc/hosts"],
		[["sed", "--in", "s/a/b/", "/etc/hosts"], "/etc/hosts"],
		[["perl", "-pi", "-e", "s/a/b/", "/etc/hosts"], "/etc/hosts"],
		[["find", "/opt", "-name", "*.pyc", "-delete"], "/opt"],
		[["dd", "if=/dev/zero", "of=/usr/lib/libc.so.6"], "/usr/lib/libc.so.6"],
	] {
		inp := t.sandboxed(t.doc([t.cmd(c[0])], null, [ro_written(c[1])]))
		r := t.result(inp)
		r.decision == "deny"
		{"id": "avfs.deny.read_only_system", "decision": "deny", "message": sprintf("Writing to the read-only system is denied: %s", [c[1]])} in r.reasons
		not "avfs.deny.outside_vault" in t.ids(inp)
	}
}

test_reads_of_the_read_only_system_are_not_writes if {
	every c in [
		[["cp", "/etc/hosts", "hosts"], "/etc/hosts"],
		[["ln", "-s", "/usr/bin/python3", "py"], "/usr/bin/python3"],
		[["sed", "-n", "1p", "/etc/hosts"], "/etc/hosts"],
		[["python3", "/usr/lib/python3/x.py"], "/usr/lib/python3/x.py"],
		[["dd", "if=/usr/lib/libc.so.6", "of=libc"], "/usr/lib/libc.so.6"],
	] {
		inp := t.sandboxed(t.doc([t.cmd(c[0])], null, [ro(c[1])]))
		not "avfs.deny.read_only_system" in t.ids(inp)
		t.decision_of(inp) != "deny"
	}
}

test_redirects_into_the_read_only_system if {
	w := [{"op": ">>", "target": "/etc/hosts"}]
	inner := t.in_script([t.with_fields(["echo", "x"], {"redirects": w})])
	p := object.union(t.where_entry("/etc/hosts", "/etc/hosts", "read_only_system", "redirect"), {"command": 1})
	inp := t.sandboxed(object.union(t.sh_c("echo x >> /etc/hosts", inner, {"redirects": w}), {"paths": [p]}))
	t.decision_of(inp) == "deny"
	"avfs.deny.read_only_system" in t.ids(inp)

	# Reading is not writing.
	rd := [{"op": "<", "target": "/etc/hosts"}]
	inner2 := t.in_script([t.with_fields(["wc", "-l"], {"redirects": rd})])
	inp2 := t.sandboxed(object.union(t.sh_c("wc -l < /etc/hosts", inner2, {"redirects": rd}), {"paths": [p]}))
	t.decision_of(inp2) == "allow"
}

test_read_only_system_writes_without_a_sandbox_are_outside if {
	inp := t.doc([t.cmd(["rm", "/usr/bin/x"])], null, [ro("/usr/bin/x")])
	t.decision_of(inp) == "deny"
	t.ids(inp) == {"avfs.deny.outside_vault"}
}

# --- the network grant (avfs.sandbox.network_host) -----------------------------

network_granted(inp) if t.result(inp).sandbox == {"network": "host"}

test_approved_network_runs_get_the_host_network if {
	every inp in [
		t.argv_input(["curl", "https://example.com"]),
		t.argv_input(["git", "push", "origin", "main"]),
		t.argv_input(["rsync", "-a", "dist/", "host:/srv"]),
		t.argv_input(["npm", "install", "left-pad"]),
		t.sandboxed(t.argv_input(["wget", "https://example.com/f"])),
	] {
		a := t.approved(inp, "ap-1")
		r := t.result(a)
		r.decision == "require_approval"
		r.sandbox == {"network": "host"}
		{"id": "avfs.sandbox.network_host", "decision": "require_approval", "message": "An approved run that needs the network reaches the host's network: ap-1"} in r.reasons
	}
}

test_network_runs_without_approval_get_no_network if {
	every inp in [
		t.argv_input(["curl", "https://example.com"]),
		t.approved(t.argv_input(["curl", "https://example.com"]), ""),
		t.approved(t.argv_input(["curl", "https://example.com"]), 1),
		object.union(t.argv_input(["curl", "https://example.com"]), {"request": {}}),
	] {
		r := t.result(inp)
		r.decision == "require_approval"
		r.sandbox == {"network": "none"}
		not "avfs.sandbox.network_host" in t.ids(inp)
	}
}

test_other_approvals_get_no_network if {
	dyn := t.with_fields(["$X", "a"], {"program": "$X", "dynamic": true})
	every inp in [
		t.approved(t.doc([dyn], null, []), "ap-1"),
		t.approved(t.argv_input(["ls"]), "ap-1"),
		t.approved(t.argv_input(["rm", "x"]), "ap-1"),
	] {
		not network_granted(inp)
		t.result(inp).sandbox == {"network": "none"}
	}
}

test_denied_network_runs_get_no_network if {
	inp := t.approved(t.doc([t.wrapped([["sudo"]], ["curl", "https://example.com"])], null, []), "ap-1")
	r := t.result(inp)
	r.decision == "deny"
	r.sandbox == {"network": "none"}
}

# In a sandbox a path only known at run time can only name what the
# sandbox shows: it is a change to checkpoint, not a deny.
test_unknown_paths_in_a_sandbox_are_changes if {
	p := t.where_entry("$D/x", "$D/x", "unknown", "arg")
	inp := t.sandboxed(t.doc([t.cmd(["cat", p.arg])], null, [p]))
	r := t.result(inp)
	r.decision == "allow_with_checkpoint"
	r.reasons == [{"id": "avfs.checkpoint.changes", "decision": "allow_with_checkpoint", "message": "Commands that may change the vault run after a checkpoint: $D/x"}]

	# Without a sandbox it could be anything: denied.
	"avfs.deny.outside_vault" in t.ids(t.doc([t.cmd(["cat", p.arg])], null, [p]))
}
