package wire

import (
	"encoding/json"
	"testing"
)

func TestFileModeJSON(t *testing.T) {
	for m, want := range map[FileMode]string{0o644: `"0644"`, 0o755: `"0755"`, 0o1777: `"1777"`, 0o4755: `"4755"`, 0: `"0000"`} {
		b, err := json.Marshal(m)
		if err != nil || string(b) != want {
			t.Errorf("%o: %s %v, want %s", uint32(m), b, err, want)
		}
		var back FileMode
		if err := json.Unmarshal(b, &back); err != nil || back != m {
			t.Errorf("%s read back as %o %v", b, uint32(back), err)
		}
		if OctalMode(uint32(m)) != want[1:5] {
			t.Errorf("OctalMode(%o) = %s", uint32(m), OctalMode(uint32(m)))
		}
	}
	for _, bad := range []string{`""`, `"0999"`, `"17777"`, `"rw-r--r--"`, `420`} {
		var m FileMode
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("%s read as %o", bad, uint32(m))
		}
	}
}
