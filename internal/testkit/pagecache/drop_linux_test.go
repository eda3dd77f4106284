package pagecache

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDropLeavesNoPageCached(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 64*os.Getpagesize()), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, _ := Resident(t, path); n == 0 {
		t.Fatal("a file just written has no page cached: cannot tell")
	}
	Drop(t, path)
	if n, _ := Resident(t, path); n != 0 {
		t.Fatalf("%d pages cached after Drop, want 0", n)
	}
}
