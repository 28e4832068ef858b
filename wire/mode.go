package wire

import (
	"fmt"
	"strconv"
)

// FileMode is a file's permission bits on the wire: a string of four
// octal digits, the setuid, setgid and sticky bits included ("0644",
// "0755", "1777", "4755"), as in the envelope's mode_before and
// mode_after. Every JSON document avfs prints writes modes so.
type FileMode uint32

// OctalMode writes the permission bits of m (07777) as FileMode does.
func OctalMode(m uint32) string { return fmt.Sprintf("%04o", m&0o7777) }

// String is the mode's four octal digits.
func (m FileMode) String() string { return OctalMode(uint32(m)) }

// MarshalText writes the mode as four octal digits.
func (m FileMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads an octal mode ("0644", "644"); more than the
// permission bits (07777) is an error.
func (m *FileMode) UnmarshalText(b []byte) error {
	n, err := strconv.ParseUint(string(b), 8, 32)
	if err != nil || n > 0o7777 || len(b) == 0 {
		return fmt.Errorf("mode %q: want octal permission bits such as \"0644\"", b)
	}
	*m = FileMode(n)
	return nil
}
