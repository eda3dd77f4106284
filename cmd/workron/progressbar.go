package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/workron/workron/api/wire"
)

// barWidth is how many cells a progress bar has.
const barWidth = 24

// progressView shows a running job's progress while wait follows it: on a
// terminal one bar, redrawn in place; elsewhere a plain line each time the
// progress changes. It writes to the stream itself (its bar moves the
// cursor) and escapes the text it shows (escapeControls).
type progressView struct {
	w    io.Writer
	tty  bool
	last string // what was shown last
	open bool   // a bar is on the current line (tty)
}

func newProgressView(w io.Writer) *progressView {
	return &progressView{w: w, tty: isTerminal(w)}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// show draws job id's progress, if it has any and it changed.
func (v *progressView) show(id string, p *wire.Progress) {
	if p == nil {
		return
	}
	if !v.tty {
		line := fmt.Sprintf("%s: %d%%", id, p.Percent)
		if p.Message != "" {
			line += " " + p.Message
		}
		if line != v.last {
			fmt.Fprintln(v.w, escapeControls(line))
			v.last = line
		}
		return
	}
	line := id + ": " + progressBar(p)
	if line == v.last && v.open {
		return
	}
	fmt.Fprint(v.w, "\r\x1b[K"+escapeControls(line)) // back to the start, clear, draw
	v.last, v.open = line, true
}

// endLine ends the bar's line, so that other output starts on its own.
func (v *progressView) endLine() {
	if v.open {
		fmt.Fprintln(v.w)
		v.open = false
	}
}

// progressBar draws p as "[#########...............]  40% message".
func progressBar(p *wire.Progress) string {
	pct := min(max(p.Percent, 0), 100)
	full := pct * barWidth / 100
	s := fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", full), strings.Repeat(".", barWidth-full), pct)
	if p.Message != "" {
		s += " " + p.Message
	}
	return s
}

// progressText is a job's progress on one line, for `jobs get`.
func progressText(p *wire.Progress) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(fmt.Sprintf("%d%% %s", p.Percent, p.Message))
}

// printResult prints a job's result, indented, after the label "result:".
func printResult(w io.Writer, r json.RawMessage) {
	if len(r) == 0 {
		return
	}
	var b bytes.Buffer
	if err := json.Indent(&b, r, "", "  "); err != nil {
		b.Reset()
		b.Write(r)
	}
	fmt.Fprintf(w, "result:\n%s\n", b.Bytes())
}
