package avfs.config_test

import data.avfs.lib

# --- data.avfs.config_problems ----------------------------------------------
#
# avfs evaluates data.avfs.config_problems once when it loads the policy
# and denies every command while it is not empty (engine.ReasonConfigInvalid).

# with_config is the default data.avfs.config with some keys replaced.
with_config(extra) := object.union(data.avfs.config, extra)

test_default_config_is_valid if {
	data.avfs.config_problems == set()
}

# Every key of policies/data.json has a shape, and every shape a key.
test_every_key_has_a_shape if {
	object.keys(data.avfs.config) == object.keys(lib.config_shapes)
	every shape in lib.config_shapes {
		lib.shapes[shape].name != ""
	}
}

test_wrong_types_are_problems if {
	every c in [
		[{"privileged_programs": "sudo"}, "data.avfs.config.privileged_programs must be a list of strings: it is of type string"],
		[{"privileged_programs": [["sudo"]]}, "data.avfs.config.privileged_programs must be a list of strings: an element is of another type"],
		[{"privileged_programs": {"sudo": true}}, "data.avfs.config.privileged_programs must be a list of strings: it is of type object"],
		[{"read_only_programs": "ls cat"}, "data.avfs.config.read_only_programs must be a list of strings: it is of type string"],
		[{"package_subcommands": {"npm": "install"}}, "data.avfs.config.package_subcommands must be an object of lists of strings: an element is of another type"],
		[{"read_only_unless_args": ["find"]}, "data.avfs.config.read_only_unless_args must be an object of lists of strings: it is of type array"],
		[{"read_only_code": {"sed": "^p$"}}, "data.avfs.config.read_only_code must be an object of lists of strings: an element is of another type"],
		[{"host_network_reasons": null}, "data.avfs.config.host_network_reasons must be a list of strings: it is of type null"],
		[{"shells": false}, "data.avfs.config.shells must be a list of strings: it is of type boolean"],
	] {
		data.avfs.config_problems == {c[1]} with data.avfs.config as with_config(c[0])
	}
}

test_missing_key_is_a_problem if {
	problems := data.avfs.config_problems with data.avfs.config as object.remove(data.avfs.config, {"privileged_programs"})
	problems == {"data.avfs.config.privileged_programs must be a list of strings: it is missing"}
}

test_config_not_an_object_is_a_problem if {
	every v in ["", [], 1] {
		data.avfs.config_problems == {"data.avfs.config is missing or not an object"} with data.avfs.config as v
	}
}

test_several_problems if {
	problems := data.avfs.config_problems with data.avfs.config as with_config({"shells": "sh", "interpreters": "python"})
	count(problems) == 2
}
