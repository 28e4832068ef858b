package avfs

# The reasons are not objects: the engine fails closed, and drops the grant.
decision := {"decision": "allow", "reasons": ["not an object"], "sandbox": {"network": "host"}}
