package wire

// CatResult is the JSON document of `avfs cat --json`: the content of a
// file (or of one of its versions) as standard base64 with padding.
//
// avfs writes it as a stream (the content is never held in memory), so
// its fields come in this order, each once: the content last. When reading
// the content fails after the document began, the document is cut short
// (invalid JSON on stdout), the error goes to stderr and the exit status
// is not zero.
type CatResult struct {
	Path          string `json:"path"`
	PathB64       string `json:"path_b64,omitempty"` // B64 of Path
	Version       int64  `json:"version,omitempty"`  // the version asked for with --version
	Size          int64  `json:"size"`               // bytes of content, before encoding
	ContentBase64 string `json:"content_base64"`
}
