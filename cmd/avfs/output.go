package main

import (
	"avfs/wire"
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// emit prints the command's result: v as JSON with --json, else human() output.
func (e *env) emit(v any, human func(w io.Writer) error) error {
	if e.json {
		e.printed = true
		return writeJSON(e.stdout, v)
	}
	if human == nil {
		return nil
	}
	return human(e.stdout)
}

// table writes aligned columns; rows are tab separated.
func table(w io.Writer, header string, rows []string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header != "" {
		fmt.Fprintln(tw, header)
	}
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	return tw.Flush()
}

// humanSize formats a byte count for people (1.5 KiB).
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// confirm asks question on the terminal and returns nil when the answer is
// yes. Without a terminal on stdin and stderr (a script, an agent) it never
// reads stdin: it refuses with a usage error that names --yes.
func (e *env) confirm(question string) error {
	in, ok := e.stdin.(*os.File)
	errOut, ok2 := e.stderr.(*os.File)
	if !ok || !ok2 || e.json || !isTerminal(in) || !isTerminal(errOut) {
		return usageError("%s refused without confirmation: add --yes", strings.TrimSuffix(question, "?"))
	}
	fmt.Fprintf(errOut, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return wire.Errorf(wire.CodeUsage, "not confirmed; nothing was deleted")
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// writeJSONBase64 writes v as writeJSON does, except that the string field
// of v tagged field, which must be empty in v, holds the standard base64 of
// the bytes content writes: they are encoded as they come, never held
// whole. The output is byte for byte writeJSON's for v with that field set
// (base64 has no character JSON escapes); TestWriteJSONBase64 pins it.
//
// field must be a top-level field of v. When content fails, what was
// written so far (a prefix of the document) stays written and its error is
// returned.
func writeJSONBase64(w io.Writer, v any, field string, content func(w io.Writer) error) error {
	var doc bytes.Buffer
	if err := writeJSON(&doc, v); err != nil {
		return err
	}
	// The indented field at the top level: a string value with the same
	// text inside would be escaped (\"), so it cannot match.
	mark := []byte("\n  \"" + field + "\": \"\"")
	if bytes.Count(doc.Bytes(), mark) != 1 {
		return wire.Errorf(wire.CodeInternal, "JSON document has no empty top-level field %q to stream", field)
	}
	i := bytes.Index(doc.Bytes(), mark) + len(mark) - 1 // at the closing quote
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.Write(doc.Bytes()[:i]); err != nil {
		return outputErr(err)
	}
	enc := base64.NewEncoder(base64.StdEncoding, bw)
	if err := content(enc); err != nil {
		_ = bw.Flush() // what was read is written: stdout holds the document's prefix
		return err
	}
	if err := enc.Close(); err != nil {
		return outputErr(err)
	}
	if _, err := bw.Write(doc.Bytes()[i:]); err != nil {
		return outputErr(err)
	}
	return outputErr(bw.Flush())
}

// outputErr types a failure to write stdout (a closed pipe, a full disk).
func outputErr(err error) error {
	if err == nil {
		return nil
	}
	return wire.Errorf(wire.CodeHostIO, "write output: %w", err)
}
