// Package golden reads the golden files of encoding tests: lines of a name,
// a space and hex bytes (lines starting with # are comments). It is test
// support only; it never writes a golden file.
package golden

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// ReadHex reads the golden file at path into a map of name to bytes.
func ReadHex(t testing.TB, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make(map[string][]byte)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, h, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		out[name] = b
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
