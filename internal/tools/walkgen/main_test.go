package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodecsAreCurrent fails when a walk changed and its writer
// and reader were not generated again (go generate ./store ./fsm).
func TestGeneratedCodecsAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, c := range []struct{ dir, in, codec, writer, reader, out string }{
		{"store", "record.go", "jobCodec", "jobWriter", "jobReader", "record_gen.go"},
		{"fsm", "submit_codec.go", "submitCodec", "submitWriter", "submitReader", "submit_gen.go"},
	} {
		src, err := os.ReadFile(filepath.Join(root, c.dir, c.in))
		if err != nil {
			t.Fatal(err)
		}
		want, err := generate(src, c.in, c.codec, c.writer, c.reader)
		if err != nil {
			t.Fatalf("%s/%s: %v", c.dir, c.in, err)
		}
		got, err := os.ReadFile(filepath.Join(root, c.dir, c.out))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s is not what walkgen writes from %s: run go generate ./%s", c.dir, c.out, c.in, c.dir)
		}
		if !strings.Contains(string(src), "//go:generate go run ../internal/tools/walkgen -in "+c.in+" -codec "+c.codec+" -writer "+c.writer+" -reader "+c.reader+" -out "+c.out) {
			t.Errorf("%s/%s lacks the go:generate line that writes %s", c.dir, c.in, c.out)
		}
	}
}

// TestGenerateRefusesOtherForms checks that a walk outside the forms
// walkgen knows is refused rather than written wrong.
func TestGenerateRefusesOtherForms(t *testing.T) {
	for name, body := range map[string]string{
		"ReadingInAnExpression": "if c.Reading() && x { c.Int(&x) }",
		"CallInAnExpression":    "x := c.Count(1, 2); _ = x",
		"ReaderOutsideReading":  "_ = c.R.Err()",
		"InitStatement":         "if c.Bool(&y); y { return }",
	} {
		src := "package p\nfunc (c *codec) walk(x int, y bool) {\n" + body + "\n}\n"
		if _, err := generate([]byte(src), "p.go", "codec", "writer", "reader"); err == nil {
			t.Errorf("%s: generated %q", name, body)
		}
	}
}
