package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workron/workron/api"
	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/leader"
	"github.com/workron/workron/store"
)

// jobFlags are the job flags submit and schedules create/update share.
type jobFlags struct {
	maxAttempts   int
	env, meta     kvFlag
	tags, payload string
	backoff       string
	res           wire.Resources
}

// register adds the job flags; prefix starts their help ("job: " for
// schedules).
func (f *jobFlags) register(fs *flag.FlagSet, req *wire.SubmitRequest, prefix string) {
	fs.StringVar(&req.Queue, "queue", "", prefix+"queue (default \"default\")")
	fs.IntVar(&req.Priority, "priority", 0, prefix+"priority; higher runs first")
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, prefix+fmt.Sprintf("how many times the job may run, the first included (default %d)", api.DefaultMaxAttempts))
	fs.StringVar(&req.Timeout, "timeout", "", prefix+"per-attempt timeout, e.g. 90s")
	fs.StringVar(&req.Retention, "retention", "", prefix+"how long the finished job is kept, e.g. 72h (default: the server's --retention, "+
		shortDuration(api.DefaultConfig().Retention)+" unless set; failed and cancelled jobs at least its --retention-failed, "+
		shortDuration(leader.DefaultKeepFailed)+" unless set)")
	fs.StringVar(&f.backoff, "backoff", "", prefix+"delay before a retry: `BASE[,MAX[,JITTER]]`, e.g. 2s,10m,0.1; left out, MAX is the default's and JITTER is 0 (default "+
		backoffText(api.DefaultBackoff)+")")
	fs.Var(&f.env, "env", prefix+"environment variable `K=V`; repeatable, the value kept whole (commas included)")
	fs.Var(&f.meta, "metadata", prefix+"metadata `K=V`; repeatable, the value kept whole")
	fs.StringVar(&req.Type, "type", "", prefix+"a typed job for the Go handler registered under this name, instead of a command")
	fs.StringVar(&f.payload, "payload", "", prefix+"the typed job's payload, a JSON document")
	fs.StringVar(&f.tags, "tags", "", prefix+"tags its worker must offer, comma-separated")
	fs.IntVar(&f.res.VRAMMB, "vram-mb", 0, prefix+"VRAM an attempt needs of its worker, in MB")
	fs.IntVar(&f.res.MemoryMB, "memory-mb", 0, prefix+"memory an attempt needs of its worker, in MB")
	fs.IntVar(&f.res.CPUMillis, "cpu-millis", 0, prefix+"CPU an attempt needs of its worker, in thousandths of a core")
	fs.IntVar(&f.res.Slots, "slots", 0, prefix+"worker slots an attempt takes (default 1)")
}

// fill completes req from the flags and the command words; verb names the
// command in errors. A job needs a command or a type unless partial (an
// update that keeps them).
func (f *jobFlags) fill(req *wire.SubmitRequest, words []string, verb string, partial bool) error {
	switch {
	case req.Type == "" && len(words) == 0 && !partial:
		return fmt.Errorf("%s: give the command after --, e.g. workron submit -- echo hello, or a --type", verb)
	case req.Type != "" && len(words) > 0:
		return fmt.Errorf("%s: give a command or a --type, not both", verb)
	case f.payload != "" && req.Type == "":
		return fmt.Errorf("%s: --payload goes with --type", verb)
	case f.payload != "" && !json.Valid([]byte(f.payload)):
		return fmt.Errorf("%s: --payload is not a JSON document: %q", verb, f.payload)
	}
	req.Command = shellCommand(words)
	if f.payload != "" {
		req.Payload = json.RawMessage(f.payload)
	}
	req.Tags = splitList(f.tags)
	if f.res != (wire.Resources{}) {
		res := f.res
		req.Resources = &res
	}
	if f.maxAttempts != 0 {
		req.MaxAttempts = &f.maxAttempts
	}
	if f.backoff != "" {
		b, err := parseBackoff(f.backoff)
		if err != nil {
			return err
		}
		req.Backoff = b
	}
	req.Env, req.Metadata = f.env.m, f.meta.m
	return nil
}

// parseBackoff reads --backoff BASE[,MAX[,JITTER]]; the server checks the
// durations.
func parseBackoff(s string) (*wire.Backoff, error) {
	parts := strings.Split(s, ",")
	if len(parts) > 3 {
		return nil, fmt.Errorf("--backoff: %q is not BASE[,MAX[,JITTER]]", s)
	}
	b := &wire.Backoff{Base: strings.TrimSpace(parts[0])}
	if len(parts) > 1 {
		b.Max = strings.TrimSpace(parts[1])
	}
	if len(parts) > 2 {
		j, err := strconv.ParseFloat(strings.TrimSpace(parts[2]), 64)
		if err != nil {
			return nil, fmt.Errorf("--backoff: jitter %q is not a number", parts[2])
		}
		b.Jitter = j
	}
	return b, nil
}

// backoffText writes a retry policy as --backoff takes it: 1s,1h,0.3.
func backoffText(b store.Backoff) string {
	return shortDuration(time.Duration(b.Base)) + "," + shortDuration(time.Duration(b.Max)) + "," + strconv.FormatFloat(b.Jitter, 'g', -1, 64)
}

// shortDuration writes d as time.Duration.String does, without zero
// minutes and seconds after the unit before them: 1h, 5m, 1h30m, 90s is 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// shellCommand makes the job's command (run with sh -c) from the words
// after --. One word is taken as a shell command as it is (`submit --
// 'make && make test'`); several are quoted for sh, so each reaches the
// program as typed (`submit -- printf '[%s]\n' "a b" c`).
func shellCommand(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes a word for sh unless it is made only of characters sh
// leaves alone.
func shellQuote(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// kvFlag is a repeatable K=V flag; each value is kept whole, commas and
// further = signs included.
type kvFlag struct{ m map[string]string }

func (f *kvFlag) String() string {
	if f == nil || len(f.m) == 0 {
		return ""
	}
	parts := make([]string, 0, len(f.m))
	for k, v := range f.m {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func (f *kvFlag) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not K=V", kv)
	}
	if f.m == nil {
		f.m = make(map[string]string)
	}
	f.m[k] = v
	return nil
}
