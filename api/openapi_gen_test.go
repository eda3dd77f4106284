package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
)

// The OpenAPI document (openapi.json) is generated from apiOps, the table
// below, and from the Go types of package wire by reflection: a field's JSON
// name and type come from its struct tag, and a field without omitempty is
// required in replies. `go test ./api -run TestOpenAPIDocument -update`
// rewrites the file; TestOpenAPIDocument fails while it is out of date.

// apiOp is one route of the API as the document describes it.
type apiOp struct {
	pattern string // as registered with the mux, e.g. "POST /jobs/{id}/fail"
	summary string
	query   []apiParam
	header  []apiParam
	body    *apiContent // request body; nil for none
	replies map[int]apiContent
	// docPaths replace the pattern's path in the document, for the prefix
	// patterns ("GET /ui/" serves /ui/ and every file under it).
	docPaths []string
}

// apiParam is a query parameter.
type apiParam struct {
	name, typ, doc string
	required       bool
}

// apiContent is a body: a JSON schema (from a Go value's type or a
// component name), or another media type with any content.
type apiContent struct {
	json     any    // a value of the Go type, or a string naming a component
	media    string // non-JSON media type
	optional bool   // a request body that may be left out
	headers  []apiParam
}

func jsonOf(v any) *apiContent         { return &apiContent{json: v} }
func optionalJSON(v any) *apiContent   { return &apiContent{json: v, optional: true} }
func mediaOf(media string) *apiContent { return &apiContent{media: media} }

// optionalMedia is a raw body the server reads whatever it holds: an empty
// one is its to refuse (400), not the document's.
func optionalMedia(media string) *apiContent { return &apiContent{media: media, optional: true} }
func replyJSON(v any) apiContent             { return apiContent{json: v} }
func replyMedia(media string) apiContent     { return apiContent{media: media} }

// noBody marks a reply without a body (204, redirects).
var noBody = apiContent{}

var (
	oaStale = apiParam{name: "stale", typ: "string", doc: "1 or true: serve this node's state as it is, asking no one; by default the node first applies the leader's commit index (a consistent read)"}
	// oaReadHeaders state a read's freshness: every 2xx reply of an
	// operation that takes oaStale carries them (reads.go).
	oaReadHeaders = []apiParam{
		{name: wire.HeaderAppliedIndex, typ: "integer", doc: "the Raft index the serving node's state stood at: the reply reflects every entry up to it at least"},
		{name: wire.HeaderLeaderCommit, typ: "integer", doc: "the leader's commit index: for a consistent read, the one the leader confirmed for this read (the applied index is at least it); " +
			"for a stale read, the one the node last heard of (absent when it knows none)"},
	}
	oaFilter  = apiParam{name: "filter", typ: "string", doc: `a filter expression (docs/api.md, Filters), e.g. status == "failed" and last_error contains "timeout"`}
	oaCascade = apiParam{name: "cascade", typ: "string", doc: "false: leave the job's dependents alone"}
	oaEpoch   = apiParam{name: "epoch", typ: "integer", doc: "the preemption epoch the task was told", required: true}
	// oaTrace is the W3C trace context header (docs/observability.md, Tracing).
	oaTrace = []apiParam{{name: "traceparent", typ: "string",
		doc: "W3C trace context: the request's span (and a submitted job's trace) joins this trace; an invalid one is ignored"}}
	// oaPrefer is RFC 7240's header, as POST /jobs/batch reads it.
	oaPrefer = apiParam{name: wire.HeaderPrefer, typ: "string",
		doc: wire.PreferMinimal + ": answer the jobs' ids (BatchSubmitIDs) instead of the jobs; other preferences are ignored"}
	// oaBatchReply is the 201 of POST /jobs/batch: the jobs, or their ids
	// with Preference-Applied when the request preferred return=minimal.
	oaBatchReply = apiContent{json: "BatchSubmitReply", headers: []apiParam{{name: wire.HeaderPreferenceApplied, typ: "string",
		doc: wire.PreferMinimal + " when the body is the jobs' ids; absent otherwise"}}}
)

var apiOps = []apiOp{
	{pattern: "POST /jobs", summary: "Submit a job (a gang with gang_size)", body: jsonOf(wire.SubmitRequest{}), header: oaTrace,
		replies: map[int]apiContent{200: replyJSON(wire.Job{}), 201: replyJSON("SubmitReply")}},
	{pattern: "POST /jobs/batch", summary: "Submit up to 1,000 jobs, all or nothing", body: jsonOf(wire.BatchSubmitRequest{}),
		header: append(slices.Clone(oaTrace), oaPrefer), replies: map[int]apiContent{201: oaBatchReply}},
	{pattern: "GET /jobs", summary: "List jobs, newest first; metadata.KEY=VALUE parameters filter by metadata",
		query: []apiParam{
			oaFilter,
			{name: "status", typ: "string", doc: "a job status"},
			{name: "queue", typ: "string"},
			{name: "limit", typ: "integer", doc: "page size"},
			{name: "cursor", typ: "string", doc: "next_cursor of the previous page"},
			oaStale,
		},
		replies: map[int]apiContent{200: replyJSON(wire.JobList{})}},
	{pattern: "GET /jobs/count", summary: "Count the jobs a filter keeps, by status; metadata.KEY=VALUE parameters filter by metadata",
		query: []apiParam{
			oaFilter,
			{name: "status", typ: "string", doc: "a job status"},
			{name: "queue", typ: "string"},
			{name: "cursor", typ: "string", doc: "next_cursor of a count that was not exact"},
			oaStale,
		},
		replies: map[int]apiContent{200: replyJSON(wire.JobCount{})}},
	{pattern: "GET /stats/series", summary: "Jobs submitted, started, done, failed and cancelled per step, queue depth and submit-to-start latency, from the job records",
		query: []apiParam{
			{name: "from", typ: "string", doc: "RFC 3339; default 3 h before to"},
			{name: "to", typ: "string", doc: "RFC 3339; default now"},
			{name: "step", typ: "string", doc: "whole minutes from 1m to 1h; default 1m"},
			{name: "queue", typ: "string", doc: "only this queue"},
			oaStale,
		},
		replies: map[int]apiContent{200: replyJSON(wire.Series{})}},
	{pattern: "GET /jobs/next", summary: "The v0 worker API's claim of one job",
		query: []apiParam{
			{name: "worker_id", typ: "string", required: true},
			{name: "wait", typ: "string", doc: "a Go duration to long-poll for"},
			{name: "queue", typ: "string"},
		},
		replies: map[int]apiContent{200: replyJSON(wire.Job{}), 204: noBody}},
	{pattern: "POST /jobs/claim", summary: "Claim jobs (long-poll), reporting finished ones", body: jsonOf(wire.ClaimRequest{}),
		replies: map[int]apiContent{200: replyJSON(wire.ClaimResponse{})}},
	{pattern: "POST /jobs/reports", summary: "Report several attempts' ends", body: jsonOf(wire.BatchReportRequest{}),
		replies: map[int]apiContent{200: replyJSON(wire.BatchReportResponse{})}},
	{pattern: "GET /jobs/{id}", summary: "A job", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.Job{})}},
	{pattern: "GET /jobs/{id}/parent_results", summary: "A page of a claimed job's parent results (the rest of a truncated claim reply)",
		query: []apiParam{
			{name: "cursor", typ: "string", doc: "parent_results_cursor of the claim reply, or next_cursor of the previous page"},
			{name: "limit", typ: "integer", doc: "the most results in the page (1 to 1000)"},
			oaStale,
		},
		replies: map[int]apiContent{200: replyJSON(wire.ParentResultsPage{})}},
	{pattern: "POST /jobs/{id}/heartbeat", summary: "Renew one job's lease", body: optionalJSON(wire.HeartbeatRequest{}),
		replies: map[int]apiContent{200: replyJSON(wire.HeartbeatResponse{})}},
	{pattern: "POST /jobs/{id}/done", summary: "Report an attempt done", body: optionalJSON(wire.ReportRequest{}), header: oaTrace,
		replies: map[int]apiContent{200: replyJSON(wire.Job{})}},
	{pattern: "POST /jobs/{id}/fail", summary: "Report an attempt failed", body: optionalJSON(wire.ReportRequest{}), header: oaTrace,
		replies: map[int]apiContent{200: replyJSON(wire.Job{})}},
	{pattern: "POST /jobs/{id}/cancel", summary: "Cancel a job", query: []apiParam{oaCascade},
		replies: map[int]apiContent{200: replyJSON(wire.Job{})}},
	{pattern: "POST /jobs/{id}/retry", summary: "Retry a failed or cancelled job", query: []apiParam{oaCascade},
		replies: map[int]apiContent{200: replyJSON(wire.Job{})}},
	{pattern: "POST /jobs/{id}/checkpoint", summary: "Store a preempted gang task's checkpoint", query: []apiParam{oaEpoch},
		body: mediaOf("application/octet-stream"), replies: map[int]apiContent{200: replyJSON(wire.CheckpointReply{})}},
	{pattern: "POST /jobs/{id}/preempted", summary: "A preempted gang task stopped", query: []apiParam{oaEpoch},
		replies: map[int]apiContent{200: replyJSON(wire.Job{})}},
	{pattern: "PUT /jobs/{id}/steps/{key}", summary: "Record a step of a running attempt's journal (once: a second record gets 409 step_recorded with the first)",
		body: jsonOf(wire.StepRequest{}), replies: map[int]apiContent{201: replyJSON(wire.Step{}), 409: replyJSON(wire.StepRecorded{})}},
	{pattern: "GET /jobs/{id}/steps", summary: "A page of a job's journal in step key order, without results unless results=1",
		query: []apiParam{
			{name: "limit", typ: "integer", doc: "page size (default 100, at most 1000)"},
			{name: "cursor", typ: "string", doc: "next_cursor of the previous page"},
			{name: "results", typ: "string", doc: "1 (or true): list each step with its result; a page then also stops before 4 MiB of results (at least one step). 0, false or absent: without results"},
			oaStale,
		},
		replies: map[int]apiContent{200: replyJSON(wire.StepList{})}},
	{pattern: "GET /jobs/{id}/steps/{key}", summary: "One recorded step with its result", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.Step{})}},
	{pattern: "POST /jobs/{id}/steps/{key}/sleep", summary: "Sleep: record the step and park the job until the wake time, uncharged (parked false when the time has passed)",
		body: jsonOf(wire.SleepRequest{}), replies: map[int]apiContent{201: replyJSON(wire.ParkReply{}), 409: replyJSON(wire.StepRecorded{})}},
	{pattern: "POST /jobs/{id}/steps/{key}/wait", summary: "Wait for an event (name, key) or a signal, with a timeout: parked, or the kept event's payload at once",
		body: jsonOf(wire.WaitRequest{}), replies: map[int]apiContent{201: replyJSON(wire.ParkReply{}), 409: replyJSON(wire.StepRecorded{})}},
	{pattern: "POST /jobs/{id}/steps/{key}/invoke", summary: "Submit a child job once and park the job until the child ends",
		body: jsonOf(wire.InvokeRequest{}), replies: map[int]apiContent{201: replyJSON(wire.ParkReply{}), 409: replyJSON(wire.StepRecorded{})}},
	{pattern: "POST /events", summary: "Send an event: wake the jobs waiting on (name, key), and keep it for the look-back window (1 h)",
		body: jsonOf(wire.EventRequest{}), replies: map[int]apiContent{202: replyJSON(wire.EventReply{})}},
	{pattern: "POST /jobs/{id}/signals/{name}", summary: "Send a signal to one job: wake its wait on the name, or keep it for the look-back window",
		body: jsonOf(wire.SignalRequest{}), replies: map[int]apiContent{202: replyJSON(wire.EventReply{})}},
	{pattern: "GET /gangs/{id}", summary: "A gang and its tasks", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.Gang{})}},
	{pattern: "POST /bulk", summary: "Start a bulk action (cancel, retry, delete, priority) on every job the filters match; dry_run counts them (200)",
		body: jsonOf(wire.BulkRequest{}), replies: map[int]apiContent{200: replyJSON(wire.BulkCount{}), 201: replyJSON(wire.Bulk{})}},
	{pattern: "GET /bulk", summary: "The bulk actions kept (at most 100), newest first", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.BulkList{})}},
	{pattern: "GET /bulk/{id}", summary: "A bulk action and its progress", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.Bulk{})}},
	{pattern: "POST /bulk/{id}/stop", summary: "Stop a bulk action before its next chunk",
		replies: map[int]apiContent{200: replyJSON(wire.Bulk{})}},
	{pattern: "POST /workers/register", summary: "Register a worker", body: jsonOf("WorkerRegistration"),
		replies: map[int]apiContent{201: replyJSON(wire.Worker{})}},
	{pattern: "POST /workers/{id}/heartbeat", summary: "Renew a worker's leases", body: optionalJSON(wire.WorkerHeartbeatRequest{}),
		replies: map[int]apiContent{200: replyJSON(wire.WorkerHeartbeatResponse{})}},
	{pattern: "POST /workers/{id}/actions", summary: "Wait for what a worker must do with its attempts", body: optionalJSON(wire.WorkerActionsRequest{}),
		replies: map[int]apiContent{200: replyJSON(wire.WorkerActionsResponse{})}},
	{pattern: "GET /workers", summary: "Workers, a page at a time in id order",
		query: []apiParam{
			{name: "limit", typ: "integer", doc: "page size (default 100, at most 1000)"},
			{name: "cursor", typ: "string", doc: "next_cursor of the previous page"},
			oaStale,
		},
		replies: map[int]apiContent{200: replyJSON(wire.WorkerList{})}},
	{pattern: "DELETE /workers/{id}", summary: "Forget an offline worker (409 while it counts as active or holds work)",
		replies: map[int]apiContent{204: noBody}},
	{pattern: "GET /queues", summary: "Queues with their counts and flow-control limits", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.QueueList{})}},
	{pattern: "GET /queues/{name}", summary: "One queue with its counts and limits (404 for a queue that holds no job, was never paused and has no limits)", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.Queue{})}},
	{pattern: "PUT /queues/{name}", summary: "Set (replace) a queue's flow-control limits; no body or {} removes them", body: optionalJSON(wire.QueueLimits{}),
		replies: map[int]apiContent{200: replyJSON(wire.Queue{})}},
	{pattern: "POST /queues/{name}/pause", summary: "Stop claims from a queue",
		replies: map[int]apiContent{200: replyJSON(wire.Queue{})}},
	{pattern: "POST /queues/{name}/resume", summary: "Restart claims from a queue, lifting its rate-limit pauses too (protocol 4)",
		replies: map[int]apiContent{200: replyJSON(wire.Queue{})}},
	{pattern: "DELETE /queues/{name}/pauses", summary: "Lift a queue's rate-limit pauses (its own and its keys'), or one key's",
		query:   []apiParam{{name: "key", typ: "string", doc: "lift only this concurrency key's pause"}},
		replies: map[int]apiContent{200: replyJSON(wire.PausesLifted{})}},
	{pattern: "GET /pauses", summary: "The rate-limit pauses in force, by queue then key",
		query:   []apiParam{{name: "limit", typ: "integer", doc: "at most this many (1-1000, default 1000)"}, {name: "cursor", typ: "string", doc: "next_cursor of the previous page"}, oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.PauseList{})}},
	{pattern: "POST /schedules", summary: "Create a schedule", body: jsonOf(wire.ScheduleRequest{}),
		replies: map[int]apiContent{201: replyJSON(wire.Schedule{})}},
	{pattern: "GET /schedules", summary: "Schedules", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.ScheduleList{})}},
	{pattern: "GET /schedules/{name}", summary: "A schedule", query: []apiParam{oaStale},
		replies: map[int]apiContent{200: replyJSON(wire.Schedule{})}},
	{pattern: "PUT /schedules/{name}", summary: "Change the fields of a schedule that the body names", body: jsonOf("SchedulePatch"),
		replies: map[int]apiContent{200: replyJSON(wire.Schedule{})}},
	{pattern: "DELETE /schedules/{name}", summary: "Delete a schedule (its jobs stay)",
		replies: map[int]apiContent{204: noBody}},
	{pattern: "POST /schedules/{name}/pause", summary: "Pause a schedule",
		replies: map[int]apiContent{200: replyJSON(wire.Schedule{})}},
	{pattern: "POST /schedules/{name}/resume", summary: "Resume a schedule",
		replies: map[int]apiContent{200: replyJSON(wire.Schedule{})}},
	{pattern: "POST /schedules/{name}/trigger", summary: "Run a schedule's job now",
		replies: map[int]apiContent{201: replyJSON(wire.Job{})}},
	{pattern: "GET /health", summary: "The node's health; with ready=1, its readiness",
		query:   []apiParam{{name: "ready", typ: "string", doc: "1 or true: readiness"}},
		replies: map[int]apiContent{200: replyJSON(wire.Health{}), 503: replyJSON(wire.Health{})}},
	{pattern: "GET /cluster", summary: "The cluster's members as this node sees them",
		replies: map[int]apiContent{200: replyJSON(wire.Cluster{})}},
	{pattern: "GET /cluster/read_index", summary: "The leader's commit index, confirmed with a quorum: what a node serving a consistent read waits to apply (503 no_leader on another node)",
		replies: map[int]apiContent{200: replyJSON(wire.ReadIndex{})}},
	{pattern: "POST /cluster/join", summary: "Add a node (a non-voter until it has caught up)", body: jsonOf(wire.JoinRequest{}),
		replies: map[int]apiContent{200: replyJSON(wire.Node{})}},
	{pattern: "DELETE /cluster/nodes/{id}", summary: "Remove a member",
		replies: map[int]apiContent{200: replyJSON(wire.Removal{})}},
	{pattern: "GET /backup", summary: "A consistent copy of the state file",
		replies: map[int]apiContent{200: replyMedia("application/octet-stream")}},
	{pattern: "POST /restore", summary: "Replace the cluster's state with a backup", body: optionalMedia("application/octet-stream"),
		replies: map[int]apiContent{200: replyJSON(wire.Restore{})}},
	{pattern: "GET /debug/digest", summary: "This node's state digest",
		replies: map[int]apiContent{200: replyJSON(wire.Digest{})}},
	{pattern: "GET /debug/pprof/", docPaths: []string{"/debug/pprof/", "/debug/pprof/{profile}"}, summary: "Go runtime profiles (with --pprof only)",
		replies: map[int]apiContent{200: replyMedia("*/*"), 404: {json: wire.Error{}, media: "text/plain"}}},
	{pattern: "POST /debug/pprof/symbol", summary: "Symbol lookups for go tool pprof (with --pprof only)",
		body: optionalMedia("application/octet-stream"), replies: map[int]apiContent{200: replyMedia("text/plain")}},
	{pattern: "GET /metrics", summary: "Prometheus metrics",
		replies: map[int]apiContent{200: replyMedia("text/plain")}},
	{pattern: "GET /openapi.json", summary: "This document",
		replies: map[int]apiContent{200: replyJSON(map[string]any{})}},
	{pattern: "GET /ui", summary: "Redirect to the dashboard", replies: uiReplies},
	{pattern: "GET /ui/", docPaths: []string{"/ui/", "/ui/{file}"}, summary: "The dashboard's files",
		replies: uiReplies},
	{pattern: "GET /{$}", summary: "Redirect to the dashboard", replies: map[int]apiContent{302: replyMedia("text/html")}},
}

// uiReplies are the dashboard's: a file, a redirect to /ui/ (the mux also
// redirects paths it cleans), or not modified.
var uiReplies = map[int]apiContent{200: replyMedia("*/*"), 301: replyMedia("text/html"), 304: noBody}

// notARoute lists mux patterns that are no operation of the API.
var notARoute = map[string]string{
	"/": "the JSON 404 for unknown routes",
}

// components whose Go type is shared by requests and replies but whose
// request form requires less, or are not named after a Go type.
var namedComponents = map[string]func(g *schemaGen) map[string]any{
	"WorkerRegistration": func(g *schemaGen) map[string]any {
		s := g.structSchema(reflect.TypeFor[wire.Worker](), []string{"id"})
		s["description"] = "The body of POST /workers/register; the other fields of a Worker are the cluster's."
		return s
	},
	"SchedulePatch": func(g *schemaGen) map[string]any {
		s := g.patchOf(reflect.TypeFor[wire.ScheduleRequest]())
		s["description"] = "The fields of a schedule to change (PUT /schedules/{name}): a field left out keeps its value, " +
			"a field given (null or empty included) replaces it; in job, likewise field by field."
		return s
	},
	"BatchSubmitReply": func(g *schemaGen) map[string]any {
		return map[string]any{"description": "The jobs, in the order of the request; their ids alone (BatchSubmitIDs) when it carried Prefer: " + wire.PreferMinimal + ".",
			"oneOf": []any{g.ref(reflect.TypeFor[wire.JobList]()), g.ref(reflect.TypeFor[wire.BatchSubmitIDs]())}}
	},
	"SubmitReply": func(g *schemaGen) map[string]any {
		return map[string]any{"description": "A job, or a gang's tasks when the submit had a gang_size.",
			"anyOf": []any{g.ref(reflect.TypeFor[wire.Job]()), g.ref(reflect.TypeFor[wire.GangSubmitResponse]())}}
	},
}

// requestRequired overrides the required fields of types used in request
// bodies: the server fills in what they leave out.
var requestRequired = map[reflect.Type][]string{
	reflect.TypeFor[wire.Resources]():              {},
	reflect.TypeFor[wire.WorkerHeartbeatRequest](): {},
	reflect.TypeFor[wire.ScheduleRequest]():        {"cron", "job"},
}

// patchOf is t's object schema for a partial update: nothing required,
// every field may be null, and a struct field (a schedule's job) a patch
// of its own.
func (g *schemaGen) patchOf(t reflect.Type) map[string]any {
	props := map[string]any{}
	var ignored []string
	g.fields(t, props, &ignored)
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type.Kind() == reflect.Struct && f.Type != timeType {
			props[name] = g.patchOf(f.Type)
		}
	}
	for name, p := range props {
		props[name] = map[string]any{"anyOf": []any{p, map[string]any{"type": "null"}}}
	}
	return map[string]any{"type": "object", "properties": props}
}

// schemaGen turns Go types into JSON Schemas under components/schemas.
type schemaGen struct {
	components map[string]any
}

var timeType = reflect.TypeFor[time.Time]()
var rawType = reflect.TypeFor[json.RawMessage]()

// ref returns a reference to t's component, generating it first.
func (g *schemaGen) ref(t reflect.Type) map[string]any {
	name := t.Name()
	if _, ok := g.components[name]; !ok {
		g.components[name] = nil                                   // a placeholder: recursive types end here
		g.components[name] = g.structSchema(t, requestRequired[t]) // nil when not overridden
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// structSchema returns t's object schema. required nil means "the fields
// without omitempty".
func (g *schemaGen) structSchema(t reflect.Type, required []string) map[string]any {
	props := map[string]any{}
	var tagRequired []string
	g.fields(t, props, &tagRequired)
	if required == nil {
		required = tagRequired
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		s["required"] = required
	}
	return s
}

func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			g.fields(f.Type, props, required)
			continue
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitempty := strings.Contains(opts, "omitempty")
		props[name] = g.typeSchema(f.Type, !omitempty)
		if !omitempty {
			*required = append(*required, name)
		}
	}
}

// typeSchema returns the schema of a value of t; nullable when Go may
// encode it as null (a nil slice, map or pointer without omitempty).
func (g *schemaGen) typeSchema(t reflect.Type, mayBeNull bool) map[string]any {
	nullable := func(s map[string]any) map[string]any {
		if !mayBeNull {
			return s
		}
		if typ, ok := s["type"].(string); ok {
			s["type"] = []any{typ, "null"}
			return s
		}
		return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{"description": "any JSON value"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(g.typeSchema(t.Elem(), false))
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	// Slices and maps may always be null: Go decodes null into them as
	// empty, and encodes a nil one as null without omitempty.
	case reflect.Slice:
		return map[string]any{"type": []any{"array", "null"}, "items": g.typeSchema(t.Elem(), false)}
	case reflect.Map:
		return map[string]any{"type": []any{"object", "null"}, "additionalProperties": g.typeSchema(t.Elem(), false)}
	case reflect.Struct:
		return g.ref(t)
	case reflect.Interface:
		return map[string]any{}
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

// content returns a media type map for c.
func (g *schemaGen) content(c apiContent) map[string]any {
	if c.json != nil && c.media != "" {
		out := g.content(apiContent{json: c.json})
		out[c.media] = map[string]any{}
		return out
	}
	switch v := c.json.(type) {
	case nil:
		if c.media == "" {
			return nil
		}
		return map[string]any{c.media: map[string]any{}}
	case string:
		if _, ok := g.components[v]; !ok {
			g.components[v] = namedComponents[v](g)
		}
		return map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + v}}}
	default:
		t := reflect.TypeOf(v)
		var s map[string]any
		if t.Kind() == reflect.Struct {
			s = g.ref(t)
		} else {
			s = g.typeSchema(t, false)
		}
		return map[string]any{"application/json": map[string]any{"schema": s}}
	}
}

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

// methodPaths returns an op's method and document paths.
func (o apiOp) methodPaths() (string, []string) {
	method, path, _ := strings.Cut(o.pattern, " ")
	if o.docPaths != nil {
		return strings.ToLower(method), o.docPaths
	}
	return strings.ToLower(method), []string{strings.ReplaceAll(path, "{$}", "")}
}

// generateOpenAPI builds the document.
func generateOpenAPI() ([]byte, error) {
	g := &schemaGen{components: map[string]any{}}
	errRef := g.ref(reflect.TypeFor[wire.Error]())
	paths := map[string]any{}
	for _, o := range apiOps {
		method, docPaths := o.methodPaths()
		for i, path := range docPaths {
			paths[path] = g.operation(o, method, path, i, errRef, paths[path])
		}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Workron",
			"version":     "1",
			"description": "Workron's HTTP API. Every node serves all of it; see docs/api.md. Generated from api/openapi_gen_test.go and package api/wire.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": g.components,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer",
					"description": "A token of the node's --auth-token-file; x-workron-role names the role an operation needs. Without --auth-token-file no token is needed."},
			},
		},
		// A token only with --auth-token-file: none is also acceptable.
		"security": []any{map[string]any{"bearer": []any{}}, map[string]any{}},
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// operation adds o's operation at path to item (a path item, nil for a new
// one) and returns it. n numbers an op's paths after the first.
func (g *schemaGen) operation(o apiOp, method, path string, n int, errRef map[string]any, item any) map[string]any {
	id := operationID(o.pattern)
	if n > 0 {
		id += fmt.Sprint(n + 1)
	}
	op := map[string]any{
		"operationId": id,
		"summary":     o.summary,
	}
	role, ok := routeRoles[o.pattern]
	if !ok {
		role = RoleAdmin
	}
	switch role {
	case routeOpen:
		op["security"] = []any{}
		op["x-workron-role"] = "open"
	default:
		op["x-workron-role"] = string(role)
	}
	var params []any
	for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for i, q := range slices.Concat(o.query, o.header) {
		in := "query"
		if i >= len(o.query) {
			in = "header"
		}
		p := map[string]any{"name": q.name, "in": in, "schema": map[string]any{"type": q.typ}}
		if q.doc != "" {
			p["description"] = q.doc
		}
		if q.required {
			p["required"] = true
		}
		params = append(params, p)
	}
	if params != nil {
		op["parameters"] = params
	}
	if o.body != nil {
		op["requestBody"] = map[string]any{"required": !o.body.optional, "content": g.content(*o.body)}
	}
	replies := map[string]any{
		"default": map[string]any{"description": "an error (docs/api.md, Requests, leaders and errors)", "content": map[string]any{"application/json": map[string]any{"schema": errRef}}},
	}
	for status, c := range o.replies {
		if status/100 == 2 && slices.Contains(o.query, oaStale) {
			c.headers = slices.Concat(c.headers, oaReadHeaders)
		}
		r := map[string]any{"description": httpStatusText(status)}
		if ct := g.content(c); ct != nil {
			r["content"] = ct
		}
		if len(c.headers) > 0 {
			hs := map[string]any{}
			for _, h := range c.headers {
				hs[h.name] = map[string]any{"description": h.doc, "schema": map[string]any{"type": h.typ}}
			}
			r["headers"] = hs
		}
		replies[fmt.Sprint(status)] = r
	}
	op["responses"] = replies
	it, _ := item.(map[string]any)
	if it == nil {
		it = map[string]any{}
	}
	it[method] = op
	return it
}

// operationID turns "POST /jobs/{id}/fail" into "postJobsIdFail".
func operationID(pattern string) string {
	var b strings.Builder
	for i, w := range regexp.MustCompile(`[A-Za-z]+`).FindAllString(pattern, -1) {
		w = strings.ToLower(w)
		if i > 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
	}
	if strings.HasSuffix(pattern, "/") {
		b.WriteString("Prefix")
	}
	if strings.HasSuffix(pattern, "{$}") {
		b.WriteString("Root")
	}
	return b.String()
}

func httpStatusText(status int) string {
	return map[int]string{200: "OK", 201: "Created", 204: "No Content", 301: "Moved Permanently",
		302: "Found", 304: "Not Modified", 404: "Not Found", 503: "Unavailable"}[status]
}
