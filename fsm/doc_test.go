package fsm_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocRuleTableNamesFiles keeps the package doc's table of where each
// rule lives true: every file it names exists in the package.
func TestDocRuleTableNamesFiles(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "// # Where each rule lives")
	if !ok {
		t.Fatal("doc.go has no section \"Where each rule lives\"")
	}
	table, _, _ = strings.Cut(table, "// # ")
	var names []string
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "//\t") { // a row of the table, not the prose around it
			names = append(names, regexp.MustCompile(`[a-z0-9_*]+\.go`).FindAllString(line, -1)...)
		}
	}
	if len(names) < 15 {
		t.Fatalf("the table names %d files: %v", len(names), names)
	}
	for _, name := range names {
		if strings.Contains(name, "*") {
			continue
		}
		if _, err := os.Stat(name); err != nil {
			t.Errorf("the package doc names %s: %v", name, err)
		}
	}
}
