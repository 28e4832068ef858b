package wire

import "testing"

func TestGoldenCatResult(t *testing.T) {
	checkGolden(t, "cat_result", CatResult{Path: "/notes.txt", Size: 6, ContentBase64: "aGVsbG8K"})
	checkGolden(t, "cat_result_version", CatResult{Path: "/notes.txt", Version: 2, Size: 3, ContentBase64: "/w+A"})
	checkGolden(t, "cat_result_raw_name", CatResult{Path: "/\xff\xfe.txt", PathB64: B64("/\xff\xfe.txt"), Size: 3, ContentBase64: "b25l"})
}
