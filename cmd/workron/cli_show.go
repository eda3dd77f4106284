package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
)

// printAttempts lists a job's finished attempts as the API keeps them
// (attempt_history, the newest 20): its number, its worker, when it
// started and ended, how it ended, its exit code and error. An attempt that
// did not count against max_attempts says so.
func (c *cli) printAttempts(h []wire.Attempt) {
	if len(h) == 0 {
		return
	}
	fmt.Fprintln(c.out, "attempt history:")
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ATTEMPT\tWORKER\tSTARTED\tENDED\tOUTCOME\tEXIT\tERROR")
	for _, a := range h {
		exit := "-"
		if a.ExitCode != nil {
			exit = strconv.Itoa(*a.ExitCode)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, cell(a.WorkerID), when(a.Started), when(a.Ended),
			outcome(a), exit, cell(a.Error))
	}
	tw.Flush()
}

// printJournal lists a job's recorded durable steps as GET /jobs/{id}
// gives them (the first 100 in key order): each step's key, status,
// tries, the job's attempt that recorded it, when, how long, and the size
// of its result.
func (c *cli) printJournal(jr *wire.Journal) {
	if jr == nil {
		return
	}
	more := ""
	if jr.Truncated {
		more = fmt.Sprintf(", the first %d shown (GET /jobs/{id}/steps lists them all)", len(jr.Steps))
	}
	fmt.Fprintf(c.out, "steps: %d recorded, %d bytes%s\n", jr.Count, jr.Bytes, more)
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tSTATUS\tTRIES\tATTEMPT\tRECORDED\tTOOK\tSIZE")
	for _, s := range jr.Steps {
		took := (time.Duration(s.DurationMillis) * time.Millisecond).String()
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%d\n", cell(s.Key), cell(s.Status), s.Attempts, s.JobAttempt, when(s.RecordedAt), took, s.Size)
	}
	tw.Flush()
}

// outcome says how an attempt ended: its status, "expired" when the
// cluster ended it rather than its worker, and "not counted" when it did
// not count against max_attempts (rate-limited, snoozed, returned or
// parked on a durable step).
func outcome(a wire.Attempt) string {
	s := cell(a.Status)
	if a.Expired {
		s += ", expired"
	}
	switch a.Status {
	case wire.AttemptRateLimited, wire.AttemptSnoozed, wire.AttemptReturned, wire.AttemptParked:
		s += ", not counted"
	}
	return s
}

// when writes a time of a table in local time, "-" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// cell keeps a table cell whole and on its line: "-" for nothing, and a
// newline or tab is written as \n or \t (escaping takes care of the other
// control characters).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return cellEscaper.Replace(s)
}

var cellEscaper = strings.NewReplacer("\n", `\n`, "\t", `\t`)

// resourcesText writes what a worker offers besides its slots, compactly:
// cpu=2.5,mem=8G,vram=24G (memory and VRAM in MB, or G when a whole number
// of 1024 MB), "-" for nothing.
func resourcesText(r wire.Resources) string {
	var parts []string
	if r.CPUMillis != 0 {
		parts = append(parts, "cpu="+strconv.FormatFloat(float64(r.CPUMillis)/1000, 'f', -1, 64))
	}
	if r.MemoryMB != 0 {
		parts = append(parts, "mem="+megabytes(r.MemoryMB))
	}
	if r.VRAMMB != 0 {
		parts = append(parts, "vram="+megabytes(r.VRAMMB))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// megabytes writes n MB as nG when n is a whole number of 1024 MB, else nM.
func megabytes(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + "G"
	}
	return strconv.Itoa(n) + "M"
}
