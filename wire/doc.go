// Package wire holds every type that crosses the process boundary: the error
// object and its codes, the policy input document, decisions and traces, and
// the proxy envelope. They are versioned; fields may be added but never
// renamed or removed, and enums are strings. Golden tests pin their JSON.
package wire
