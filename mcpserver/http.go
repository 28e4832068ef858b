package mcpserver

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"avfs/wire"
)

// CheckListen checks that addr (host:port) may be served: a loopback
// address always, any other only with a bearer token. A host name other
// than localhost counts as not loopback.
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return wire.Errorf(wire.CodeUsage, "mcp: --listen %q: want HOST:PORT (%v)", addr, err)
	}
	if isLoopback(host) || token != "" {
		return nil
	}
	return wire.Errorf(wire.CodeUsage, "mcp: --listen %s is not a loopback address: give a bearer token (AVFS_MCP_TOKEN) so that only its holders can run commands", addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HTTPHandler serves s over Streamable HTTP. With a token, every request
// must carry "Authorization: Bearer <token>" (compared in constant time) or
// is answered 401 before it reaches the server.
func HTTPHandler(s *mcp.Server, token string) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="avfs"`)
			http.Error(w, "avfs mcp: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
