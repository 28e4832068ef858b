package mount

import (
	"crypto/rand"
	"os"
	"testing"
	"time"
)

// TestCheckpointerUnderMount: the server of a writer mount checkpoints the
// vault's log in the background: after 24 MiB written through the mount
// (less than the 40 MiB at which a connection checkpoints inline), the log
// is emptied while the vault is still mounted, once writes pause.
func TestCheckpointerUnderMount(t *testing.T) {
	s := serve(t, false)
	big := make([]byte, 24<<20)
	rand.Read(big)
	if err := os.WriteFile(s.path("big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	wal := s.v.Path() + "-wal"
	deadline := time.Now().Add(30 * time.Second)
	for {
		fi, err := os.Stat(wal)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log is still %d bytes 30 s after the write: no background checkpoint", fi.Size())
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := os.ReadFile(s.path("big"))
	if err != nil || string(got) != string(big) {
		t.Fatalf("read back: %v (equal %v)", err, string(got) == string(big))
	}
	s.mustCheck()
}
