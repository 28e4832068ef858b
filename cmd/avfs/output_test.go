package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"avfs/wire"
)

// writeJSONBase64 prints what writeJSON prints for the same document, for
// any content (every byte value, not UTF-8, every length modulo 3, longer
// than its buffer, written in odd pieces) and paths JSON must escape.
func TestWriteJSONBase64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	contents := [][]byte{nil, {0}, {0xff}, {0xff, 0xfe}, []byte("\xc3\x28 not UTF-8 \xed\xa0\x80"), all, random(200<<10 + 1)}
	for n := range 10 {
		contents = append(contents, random(n))
	}
	paths := []string{"/f", "/a \"quoted\" \\ name", "/ctl\x00\x01\t\n\x7f", "/<html>&amp;", "/sep\u2028\u2029", "/bad\xff\xfeutf8",
		"/x\n  \"content_base64\": \"\"", "/ünïcødé/日本"}
	for _, p := range paths {
		for _, c := range contents {
			for _, version := range []int64{0, 3} {
				doc := wire.CatResult{Path: p, Version: version, Size: int64(len(c))}
				var got bytes.Buffer
				err := writeJSONBase64(&got, doc, "content_base64", func(w io.Writer) error {
					for rest := c; len(rest) > 0; {
						k := min(len(rest), 1+rng.IntN(7))
						if _, err := w.Write(rest[:k]); err != nil {
							return err
						}
						rest = rest[k:]
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				doc.ContentBase64 = base64.StdEncoding.EncodeToString(c)
				var want bytes.Buffer
				if err := writeJSON(&want, doc); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("path %q, %d bytes: streamed\n%q\nwant\n%q", p, len(c), trim(got.String()), trim(want.String()))
				}
			}
		}
	}
}

// A failure of the content leaves a prefix of the document and is returned.
func TestWriteJSONBase64Failure(t *testing.T) {
	boom := errors.New("boom")
	content := bytes.Repeat([]byte("abc"), 100<<10)
	var got bytes.Buffer
	err := writeJSONBase64(&got, wire.CatResult{Path: "/f", Size: int64(len(content))}, "content_base64", func(w io.Writer) error {
		if _, err := w.Write(content[:len(content)/2]); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v", err)
	}
	var full bytes.Buffer
	_ = writeJSON(&full, wire.CatResult{Path: "/f", Size: int64(len(content)), ContentBase64: base64.StdEncoding.EncodeToString(content)})
	if got.Len() < len(content)/2 || !bytes.HasPrefix(full.Bytes(), got.Bytes()) {
		t.Fatalf("%d bytes written, a prefix of the document: %v", got.Len(), bytes.HasPrefix(full.Bytes(), got.Bytes()))
	}
	// A document without the field is refused before anything is written.
	got.Reset()
	if err := writeJSONBase64(&got, map[string]string{"other": ""}, "content_base64", nil); !wire.HasCode(err, wire.CodeInternal) || got.Len() != 0 {
		t.Fatalf("no field: %v, %d bytes", err, got.Len())
	}
}

func trim(s string) string {
	if len(s) > 300 {
		return s[:150] + "…" + s[len(s)-150:]
	}
	return s
}
