// Package proctest answers tests' questions about processes on this host
// from /proc; it starts and signals nothing.
package proctest

import (
	"os"
	"strconv"
	"strings"
)

// Gone reports whether pid has exited. A zombie counts as gone: it runs
// nothing, and whoever reaps it may not be the test.
func Gone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}
