package policies

import "embed"

// FS is the default bundle: .manifest, data.json, the program specs and
// the Rego modules, at its root, as `opa build policies` would pack them.
//
//go:embed .manifest data.json avfs/programs/data.json *.rego
var FS embed.FS

// ProgramsFile is the file of FS that holds the default program specs,
// data.avfs.programs (docs/policy.md, "Program specs").
const ProgramsFile = "avfs/programs/data.json"
