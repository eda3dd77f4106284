//go:build unix

package main

import (
	"bytes"
	"strings"
	"testing"
)

// A step's command: its output is copied through and kept as a JSON
// string; output past the bound of a step's result, or not UTF-8, fails
// the step; its exit code is workron step's.
func TestStepCommandOutput(t *testing.T) {
	var out, errs bytes.Buffer
	run, code, err := runStepCommand([]string{"sh", "-c", `printf 'a"b\n'; echo oops >&2`}, strings.NewReader(""), &out, &errs)
	if err != nil || code != 0 || string(run.result) != `"a\"b\n"` || out.String() != "a\"b\n" || errs.String() != "oops\n" {
		t.Fatalf("got %s, code %d, %v; stdout %q, stderr %q", run.result, code, err, out.String(), errs.String())
	}
	if _, code, err := runStepCommand([]string{"sh", "-c", "exit 7"}, nil, &out, &errs); err != nil || code != 7 {
		t.Fatalf("exit 7: code %d, %v", code, err)
	}
	if _, code, err := runStepCommand([]string{"sh", "-c", "kill -9 $$"}, nil, &out, &errs); err != nil || code != 128+9 {
		t.Fatalf("killed: code %d, %v, want 137", code, err)
	}
	out.Reset()
	_, _, err = runStepCommand([]string{"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x"}, nil, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "the most a step records") || out.Len() != 300000 {
		t.Fatalf("300,000 bytes of output: %v, %d bytes copied through", err, out.Len())
	}
	if _, _, err := runStepCommand([]string{"printf", `\377`}, nil, &out, &errs); err == nil || !strings.Contains(err.Error(), "not UTF-8") {
		t.Fatalf("non-UTF-8 output: %v", err)
	}
}
