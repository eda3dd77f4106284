package hostile

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// PrintTable writes the report as a Markdown table, one row an attack, and
// the failures under it: the figures docs/security.md quotes.
func PrintTable(w io.Writer, rep *Report) {
	fmt.Fprintln(w, "| attack | requests (status: count) | term | /health p50 / p99 / max | max RSS | figures | verdict |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rep.Results {
		verdict := "held"
		if len(r.Failures) > 0 {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "| %s | %d (%s) | %d→%d | %v / %v / %v | %d MiB | %s | %s |\n",
			r.Attack, r.Requests, statuses(r.Statuses), r.TermBefore, r.TermAfter,
			ms(r.HealthP50), ms(r.HealthP99), ms(r.HealthMax), r.MaxRSS>>20, figures(r.Figures), verdict)
	}
	fmt.Fprintf(w, "\ncanary jobs accepted during the attacks: %d, not finished afterwards: %d\n", rep.CanariesAccepted, len(rep.CanariesLost))
	for _, r := range rep.Results {
		for _, f := range r.Failures {
			fmt.Fprintf(w, "FAILED %s: %s\n", r.Attack, f)
		}
	}
	if len(rep.CanariesLost) > 0 {
		fmt.Fprintf(w, "FAILED canaries: lost %v\n", rep.CanariesLost)
	}
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

func statuses(m map[int]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		name := fmt.Sprint(k)
		if k == 0 {
			name = "no reply"
		}
		parts = append(parts, fmt.Sprintf("%s: %d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}

func figures(m map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %v", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
