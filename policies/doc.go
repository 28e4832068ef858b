// Package policies holds the default policy bundle of avfs: Rego v1 modules
// (package avfs and below), the tunable lists in data.json and the bundle
// manifest. The files are embedded in the binary (FS) and loaded by the
// bundles package unless the user turns the default off. Their tests are in
// tests/rego (make test-rego).
package policies
