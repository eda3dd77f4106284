package shapes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// column is one system's figures, by Figure name.
type column struct {
	name string
	figs map[string]Figure
}

// tableRow is one line of the comparison: the subject's Figure and the
// peers' Figure of the same shape.
type tableRow struct {
	label   string // with %d for the subject's clients when slots is set
	subject string // Figure name in the first column (Workron)
	peer    string // Figure name in the others
	slots   bool
}

// tableRows are the comparison's lines.
var tableRows = []tableRow{
	{"single submit (jobs/s)", "submit_single", "submit_single", false},
	{"batch submit, 1,000 a call, 4 clients (jobs/s)", "submit_batch", "submit_batch", false},
	{"claim → done, one job per claim (jobs/s)", "claim_done", "claim_done", false},
	{"claim → done, the report on the next claim (jobs/s)", "claim_done_piggyback", "claim_done", false},
	{"claim → done, up to 16 a claim, reports on the next claim (jobs/s)", "claim_done_batched", "claim_done", false},
	{"claim → done, the Go worker, %d slots (jobs/s)", "claim_done_worker", "claim_done", true},
	{"submit → start at a steady rate, 8 workers, p50 (ms)", "latency_p50", "latency_p50", false},
	{"submit → start, p99 (ms)", "latency_p99", "latency_p99", false},
	{"submit → start, max (ms)", "latency_max", "latency_max", false},
}

// RunTable is `peers-bench table NAME=FILE ...`: the first is the subject,
// the others its peers; each FILE holds JSON lines of figures.
func RunTable(args []string, stdout io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: peers-bench table NAME=FILE NAME=FILE ... (the subject first)")
	}
	var cols []column
	for _, a := range args {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return fmt.Errorf("table: %q is not NAME=FILE", a)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("table: %w", err)
		}
		figs, err := readFigures(data)
		if err != nil {
			return fmt.Errorf("table: %s: %w", path, err)
		}
		cols = append(cols, column{name: name, figs: figs})
	}
	writeTable(stdout, cols)
	return nil
}

// readFigures reads JSON lines of figures, skipping lines that are not
// JSON objects (a table printed before them).
func readFigures(data []byte) (map[string]Figure, error) {
	out := map[string]Figure{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var f Figure
		if err := json.Unmarshal(line, &f); err != nil {
			return nil, fmt.Errorf("decode %q: %w", line, err)
		}
		if f.Figure != "" {
			out[f.Figure] = f
		}
	}
	return out, sc.Err()
}

// writeTable prints a Markdown table: one line per shape, the subject's
// Figure, then each peer's Figure and subject ÷ peer.
func writeTable(w io.Writer, cols []column) {
	subject := cols[0]
	clients := 0
	if f, ok := subject.figs["submit_single"]; ok {
		clients = f.Clients
	}
	head := []string{fmt.Sprintf("%d clients / %d workers", clients, clients), subject.name}
	for _, c := range cols[1:] {
		head = append(head, c.name, subject.name+" ÷ "+c.name)
	}
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat(" --- |", len(head)))
	for _, r := range tableRows {
		s, sok := subject.figs[r.subject]
		label := r.label
		if r.slots {
			label = fmt.Sprintf(label, clients)
		}
		cells := []string{label, cell(s, sok)}
		for _, c := range cols[1:] {
			p, pok := c.figs[r.peer]
			cells = append(cells, cell(p, pok), ratio(s, sok, p, pok))
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
	fmt.Fprintf(w, "\n%s ÷ peer: above 1 means %s is faster in the jobs/s lines and slower in the ms lines.\n", subject.name, subject.name)
	for _, c := range cols[1:] {
		for _, f := range c.figs {
			if f.Settings != "" {
				fmt.Fprintf(w, "%s: %s.\n", c.name, f.Settings)
				break
			}
		}
	}
	for _, c := range cols {
		for _, name := range slices.Sorted(maps.Keys(c.figs)) {
			if f := c.figs[name]; !f.Correct {
				fmt.Fprintf(w, "%s %s: check FAILED: %s\n", c.name, name, f.Problems)
			}
		}
	}
}

func cell(f Figure, ok bool) string {
	if !ok {
		return "—"
	}
	v := formatValue(f)
	if !f.Correct {
		v += " (FAILED)"
	}
	return v
}

func formatValue(f Figure) string {
	if f.Unit == "ms" {
		return strconv.FormatFloat(f.Value, 'f', 1, 64)
	}
	return thousands(int64(f.Value + 0.5))
}

func ratio(s Figure, sok bool, p Figure, pok bool) string {
	if !sok || !pok || p.Value == 0 || s.Unit != p.Unit {
		return "—"
	}
	return strconv.FormatFloat(s.Value/p.Value, 'f', 2, 64) + "×"
}

// thousands writes n with commas: 12345 → "12,345".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
