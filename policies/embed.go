package policies

import "embed"

// FS is the default bundle: .manifest, data.json and the Rego modules, at
// its root, as `opa build policies` would pack them.
//
//go:embed .manifest data.json *.rego
var FS embed.FS
