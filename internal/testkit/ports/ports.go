// Package ports picks free TCP ports on 127.0.0.1 for tests and harnesses
// that start real processes, which must be told their ports up front.
package ports

import (
	"fmt"
	"net"
)

// Free picks n distinct ports that were free a moment ago. Another process
// may take one before the caller binds it: callers retry on a failed bind.
func Free(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for len(out) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
