// Package shapes runs the load shapes of `workron bench` against any job
// system behind the small Peer interface, checks what each system did, and
// prints the comparison table. It imports no queue library and opens no
// connection itself: the Peer does.
package shapes

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Flags are the flags shared with `workron bench`, with its meanings.
type Flags struct {
	Short     bool
	Clients   int           // concurrent single submitters, and workers of claim_done
	Jobs      int           // jobs of submit_single and claim_done; submit_batch sends twice as many
	Rate      float64       // submissions per second of the latency scenario
	Duration  time.Duration // how long the latency scenario submits
	Scenarios string        // comma-separated
}

// Register adds the flags to fs, with `workron bench`'s defaults.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&f.Short, "short", false, "quick correctness run: --jobs 2000 and --duration 3s unless given")
	fs.IntVar(&f.Clients, "clients", 64, "concurrent single-job submitters, and workers of claim_done")
	fs.IntVar(&f.Jobs, "jobs", 20000, "jobs of submit_single and of claim_done; submit_batch sends twice as many")
	fs.Float64Var(&f.Rate, "rate", 200, "submissions per second in the latency scenario")
	fs.DurationVar(&f.Duration, "duration", 10*time.Second, "how long the latency scenario submits")
	fs.StringVar(&f.Scenarios, "scenarios", strings.Join(Scenarios, ","), "scenarios to run, comma-separated")
}

// Validate names the first flag out of bounds and applies --short's
// defaults to the flags not in set.
func (f *Flags) Validate(set map[string]bool) error {
	if f.Short {
		if !set["jobs"] {
			f.Jobs = 2000
		}
		if !set["duration"] {
			f.Duration = 3 * time.Second
		}
	}
	switch {
	case f.Clients < 1:
		return fmt.Errorf("--clients must be at least 1, got %d", f.Clients)
	case f.Jobs < 1:
		return fmt.Errorf("--jobs must be at least 1, got %d", f.Jobs)
	case f.Rate <= 0 || math.IsInf(f.Rate, 0) || math.IsNaN(f.Rate):
		return fmt.Errorf("--rate must be a positive number, got %v", f.Rate)
	case f.Duration <= 0:
		return fmt.Errorf("--duration must be positive, got %s", f.Duration)
	}
	for _, s := range splitList(f.Scenarios) {
		if !slices.Contains(Scenarios, s) {
			return fmt.Errorf("--scenarios: unknown scenario %q (known: %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	return nil
}

// Figure is one measured number, one JSON line: the fields `workron bench
// -o json` prints, less the Raft counters, plus the system.
type Figure struct {
	System   string  `json:"system,omitempty"`
	Settings string  `json:"settings,omitempty"` // durability and tuning in force
	Figure   string  `json:"figure"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Jobs     int     `json:"jobs"`
	Seconds  float64 `json:"seconds"`
	Clients  int     `json:"clients,omitempty"`
	Errors   int64   `json:"errors"`
	CPUCores float64 `json:"cpu_cores"`
	Load1    float64 `json:"load1,omitempty"`
	Correct  bool    `json:"correct"`
	Problems string  `json:"problems,omitempty"`
	Note     string  `json:"note,omitempty"`
}

// Run runs f's scenarios against p and prints one JSON line per figure on
// stdout (progress on stderr). It fails when a scenario cannot run or a
// correctness check fails, never because of speed.
func Run(ctx context.Context, p Peer, f Flags, stdout, stderr io.Writer) error {
	r := &runner{f: f, p: p, stderr: stderr, runID: strconv.FormatInt(time.Now().UnixMilli()%1e9, 36)}
	fmt.Fprintf(stderr, "peers-bench: %s (%s), load average %.1f\n", p.Label(), p.Settings(), loadAverage())
	var figs []Figure
	for _, s := range splitList(f.Scenarios) {
		fmt.Fprintf(stderr, "peers-bench: %s %s\n", p.Label(), s)
		got, err := r.run(ctx, s)
		if err != nil {
			return fmt.Errorf("%s %s: %w", p.Label(), s, err)
		}
		figs = append(figs, got...)
	}
	enc := json.NewEncoder(stdout)
	var bad []string
	for _, fg := range figs {
		fg.System, fg.Settings = p.Label(), p.Settings()
		_ = enc.Encode(fg)
		if !fg.Correct {
			bad = append(bad, fg.Figure+": "+fg.Problems)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: correctness check failed: %s", p.Label(), strings.Join(bad, "; "))
	}
	return nil
}

// loadAverage is the host's one-minute load average (0 where unknown).
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(data), " ")
	v, _ := strconv.ParseFloat(first, 64)
	return v
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
