package vault

import "testing"

func TestKindTextRoundTrip(t *testing.T) {
	for _, k := range []Kind{KindFile, KindDir, KindSymlink, KindFifo, KindSocket} {
		b, err := k.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Kind
		if err := got.UnmarshalText(b); err != nil || got != k {
			t.Errorf("%s: read back %v, %v", b, got, err)
		}
	}
	var k Kind
	if err := k.UnmarshalText([]byte("door")); err == nil {
		t.Error("an unknown kind was read")
	}
}
