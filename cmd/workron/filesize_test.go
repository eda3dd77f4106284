package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileLines is the most lines a production Go file of the repository
// may have: past it a file holds more than one concern, and is split by
// concern (a pure move within its package).
const maxFileLines = 600

// TestNoLongFiles keeps every production Go file (tests and generated
// code left out) at most maxFileLines lines long.
func TestNoLongFiles(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b[:min(len(b), 512)], []byte("// Code generated ")) {
			return nil
		}
		checked++
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			rel, _ := filepath.Rel(repoRoot, path)
			t.Errorf("%s has %d lines, more than %d: split it by concern", rel, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files found under %s", checked, repoRoot)
	}
}
