package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// checkProgress checks the progress of a heartbeat (a worker's lease, or
// a job's own) or a report, f naming a field of it (f("progress") is, say,
// "jobs[0].progress"; called only to name a bad one): a percent from 0 to 100 and a
// message of at most wire.MaxProgressMessage bytes (400 naming the field
// beyond).
func checkProgress(f func(string) string, p *wire.ProgressUpdate) (*fsm.LeaseProgress, error) {
	if p == nil {
		return nil, nil
	}
	if p.Percent < 0 || p.Percent > 100 {
		return nil, invalid(f("progress.percent"), "must be from 0 to 100, got %d", p.Percent)
	}
	if len(p.Message) > wire.MaxProgressMessage {
		return nil, invalid(f("progress.message"), "must be at most %d bytes, got %d", wire.MaxProgressMessage, len(p.Message))
	}
	return &fsm.LeaseProgress{Percent: p.Percent, Message: p.Message}, nil
}

// reportEnd checks a report's result and progress, f naming a field of
// the report (f("result") is "result" or "reports[0].result"; called only
// to name a bad one).
func reportEnd(f func(string) string, req *wire.ReportRequest) (json.RawMessage, *fsm.LeaseProgress, error) {
	result, err := reportResult(f, req.Result)
	if err != nil {
		return nil, nil, err
	}
	p, err := checkProgress(f, req.Progress)
	return result, p, err
}

// reportResult checks a report's result: at most wire.MaxResultBytes of
// JSON (413 naming field beyond). JSON null is no result.
func reportResult(f func(string) string, r json.RawMessage) (json.RawMessage, error) {
	if wire.IsNullResult(r) {
		return nil, nil
	}
	if len(r) > wire.MaxResultBytes {
		return nil, &badRequest{field: f("result"), reason: fmt.Sprintf("a result is at most %d bytes of JSON, got %d", wire.MaxResultBytes, len(r)), tooBig: true}
	}
	return r, nil
}

// progressWire shows a job's latest progress and its result.
func progressWire(out *wire.Job, j *store.Job) {
	if p := j.Progress; p != nil {
		out.Progress = &wire.Progress{Percent: p.Percent, Message: p.Message, At: time.Unix(0, p.At).UTC()}
	}
	out.Result = j.Result
}

// fieldName names a field of a request that is one report or lease (see
// reportEnd).
func fieldName(field string) string { return field }
