package shapes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTableRatiosAndMissingShapes(t *testing.T) {
	dir := t.TempDir()
	// workron bench -o table prints a table before the JSON lines.
	workron := "FIGURE  VALUE\nsubmit_single 2000.0\n" +
		`{"Figure":"submit_single","value":2000,"unit":"jobs/s","clients":16,"correct":true}` + "\n" +
		`{"Figure":"submit_batch","value":30000,"unit":"jobs/s","correct":true}` + "\n" +
		`{"Figure":"claim_done_piggyback","value":1500,"unit":"jobs/s","correct":true}` + "\n" +
		`{"Figure":"claim_done_worker","value":4500,"unit":"jobs/s","clients":16,"correct":true}` + "\n" +
		`{"Figure":"latency_p50","value":8,"unit":"ms","correct":true}` + "\n"
	peer := `{"system":"R","settings":"PostgreSQL 15, fsync on","Figure":"submit_single","value":4000,"unit":"jobs/s","correct":true}` + "\n" +
		`{"Figure":"claim_done","value":3000,"unit":"jobs/s","correct":false,"problems":"job 3 started 2 times, want 1"}` + "\n" +
		`{"Figure":"latency_p50","value":2,"unit":"ms","correct":true}` + "\n"
	wf, pf := filepath.Join(dir, "w.json"), filepath.Join(dir, "p.json")
	if err := os.WriteFile(wf, []byte(workron), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pf, []byte(peer), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := RunTable([]string{"Workron=" + wf, "River=" + pf}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"| 16 clients / 16 workers | Workron | River | Workron ÷ River |",
		"| single submit (jobs/s) | 2,000 | 4,000 | 0.50× |",
		"| batch submit, 1,000 a call, 4 clients (jobs/s) | 30,000 | — | — |",
		"| claim → done, one job per claim (jobs/s) | — | 3,000 (FAILED) | — |",
		"| claim → done, the report on the next claim (jobs/s) | 1,500 | 3,000 (FAILED) | 0.50× |",
		"| claim → done, up to 16 a claim, reports on the next claim (jobs/s) | — | 3,000 (FAILED) | — |",
		"| claim → done, the Go worker, 16 slots (jobs/s) | 4,500 | 3,000 (FAILED) | 1.50× |",
		"| submit → start at a steady rate, 8 workers, p50 (ms) | 8.0 | 2.0 | 4.00× |",
		"River: PostgreSQL 15, fsync on.",
		"River claim_done: check FAILED: job 3 started 2 times, want 1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

func TestTableRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{{"Workron=x"}, {"Workron", "River=y"}, {"Workron=/nonexistent/a", "River=/nonexistent/b"}} {
		if err := RunTable(args, &strings.Builder{}); err == nil {
			t.Errorf("RunTable(%q) succeeded, want an error", args)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
