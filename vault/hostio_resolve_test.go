package vault

import "testing"

// eachResolver runs fn with openat2 and again with the openat walk used
// where the kernel has no openat2.
func eachResolver(t *testing.T, fn func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "openat-walk"
		}
		t.Run(name, func(t *testing.T) {
			old := noOpenat2.Load()
			noOpenat2.Store(walk)
			t.Cleanup(func() { noOpenat2.Store(old) })
			fn(t)
		})
	}
}
