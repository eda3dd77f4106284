package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// statuses is the HTTP status of each error code (wire.Codes): the one
// table relating the two, which the status table of docs/api.md shows.
var statuses = map[string]int{
	wire.CodeInvalid:              http.StatusBadRequest,
	wire.CodeStepRecorded:         http.StatusConflict,
	wire.CodeJournalFull:          http.StatusConflict,
	wire.CodeBadBackup:            http.StatusBadRequest,
	wire.CodeUnauthorized:         http.StatusUnauthorized,
	wire.CodeForbidden:            http.StatusForbidden,
	wire.CodeCrossOrigin:          http.StatusForbidden,
	wire.CodeHostNotAllowed:       http.StatusForbidden,
	wire.CodeNotFound:             http.StatusNotFound,
	wire.CodeStaleLease:           http.StatusConflict,
	wire.CodeStaleEpoch:           http.StatusConflict,
	wire.CodeNotRunning:           http.StatusConflict,
	wire.CodeConflict:             http.StatusConflict,
	wire.CodeLeaseRequired:        http.StatusConflict,
	wire.CodeTooLarge:             http.StatusRequestEntityTooLarge,
	wire.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	wire.CodeOverloaded:           http.StatusTooManyRequests,
	wire.CodeTooManyWorkers:       http.StatusTooManyRequests,
	wire.CodeTooManyWaiters:       http.StatusTooManyRequests,
	wire.CodeEventsFull:           http.StatusTooManyRequests,
	wire.CodeInternal:             http.StatusInternalServerError,
	wire.CodeNoLeader:             http.StatusServiceUnavailable,
	wire.CodeRemoved:              http.StatusServiceUnavailable,
	wire.CodeBusy:                 http.StatusServiceUnavailable,
	wire.CodeUpgradeInProgress:    http.StatusServiceUnavailable,
	wire.CodeCatchingUp:           http.StatusServiceUnavailable,
	wire.CodeOutcomeUnknown:       http.StatusGatewayTimeout,
}

// statusOf is the HTTP status of an error code.
func statusOf(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Sentences of the replies whose error carries no text meant for users.
const (
	msgNoLeader       = "this node cannot reach a leader right now; nothing was done, retry"
	msgTooManyWorkers = " (--max-workers-per-token); nothing was done: reuse a worker id, or retry once one is offline (silent for --worker-offline-after) or forgotten (DELETE /workers/{id})"
	msgOverloaded     = "this node has as many waiting claims as it allows (--max-long-polls); no job is ready, retry later"
	msgBusy           = "this node holds as many request bodies as it allows (--max-body-bytes-in-flight); nothing was read or done, retry later or on another node"
	whyNotCommitted   = "the command was handed to Raft but is not known to be committed (the leader lost its leadership, stopped, or took too long)"
	msgUnknownOutcome = "; the request may or may not have taken effect: retry with the same idempotency_key (or check) to be safe"
)

// reply is the one map of an error to what a client is told: its code
// (wire.Code*, whose status statusOf gives) and its sentence. fail writes
// it as the reply; a reply of several outcomes (a batch of reports) carries
// it per outcome. The sentence is the error's own text: errors that reach a
// client are made with text meant for users (the fsm's rejections, the API's
// badRequest and refusal), or get a sentence here.
func reply(err error) (code, msg string) {
	var (
		be *badRequest
		re *refusal
		ve *fsm.ValidationError
		ue *raftnode.NeedsUpgradeError
		tw *fsm.TooManyWorkersError
		ts *fsm.TooManySchedulesError
	)
	switch {
	case errors.As(err, &re):
		return re.code, re.msg
	case errors.As(err, &be):
		return be.code(), be.Error()
	case errors.As(err, &ve):
		return wire.CodeInvalid, ve.Error()
	case errors.As(err, &tw):
		return wire.CodeTooManyWorkers, err.Error() + msgTooManyWorkers
	case errors.As(err, &ts):
		return wire.CodeConflict, err.Error()
	case errors.Is(err, errTooManyLongPolls):
		return wire.CodeOverloaded, msgOverloaded
	case errors.Is(err, errBusy):
		return wire.CodeBusy, msgBusy
	case errors.Is(err, fsm.ErrNotFound), errors.Is(err, fsm.ErrWorkerNotFound),
		errors.Is(err, fsm.ErrScheduleNotFound), errors.Is(err, fsm.ErrGangNotFound),
		errors.Is(err, fsm.ErrBulkNotFound):
		return wire.CodeNotFound, err.Error()
	case errors.Is(err, fsm.ErrStaleEpoch):
		return wire.CodeStaleEpoch, err.Error()
	case errors.Is(err, fsm.ErrStaleLease):
		return wire.CodeStaleLease, err.Error()
	case errors.Is(err, fsm.ErrLeaseRequired):
		return wire.CodeLeaseRequired, err.Error()
	case errors.Is(err, fsm.ErrForbidden):
		return wire.CodeForbidden, err.Error()
	case errors.Is(err, fsm.ErrNotRunning):
		return wire.CodeNotRunning, err.Error()
	case errors.Is(err, fsm.ErrTooManyBulk):
		return wire.CodeConflict, err.Error() + " (at most 4): wait for one to end, or stop one (POST /bulk/{id}/stop)"
	case errors.Is(err, fsm.ErrConflict):
		return wire.CodeConflict, err.Error()
	case errors.Is(err, fsm.ErrStepRecorded):
		return wire.CodeStepRecorded, err.Error()
	case errors.Is(err, fsm.ErrJournalFull):
		return wire.CodeJournalFull, err.Error()
	case errors.Is(err, fsm.ErrTooManyWaiters):
		return wire.CodeTooManyWaiters, err.Error()
	case errors.Is(err, fsm.ErrEventsFull):
		return wire.CodeEventsFull, err.Error()
	case nothingDone(err):
		return wire.CodeNoLeader, msgNoLeader
	case errors.As(err, &ue):
		return wire.CodeUpgradeInProgress, upgradeMessage(ue)
	case errors.Is(err, raftnode.ErrUnknownOutcome):
		return wire.CodeOutcomeUnknown, whyNotCommitted + msgUnknownOutcome
	}
	return wire.CodeInternal, err.Error()
}

// fail answers err: the code and sentence reply gives, with the code's
// status. A request that found no leader is left to serveLeader to serve
// again while it may; an internal error is logged.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := reply(err)
	switch code {
	case wire.CodeNoLeader:
		if retryAfterNotLeader(r, err) {
			return // serveLeader waits for the new leader and serves it there
		}
	case wire.CodeInternal:
		s.logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err, "request_id", requestID(r.Context()))
	}
	writeError(w, code, msg)
}

// writeError writes the one error shape every failure uses, with the
// code's status. A 429 or 503 tells the client when to retry.
func writeError(w http.ResponseWriter, code, msg string) {
	status := statusOf(code)
	if code == wire.CodeBusy {
		// A follower passes the leader's busy on rather than sending the
		// body again (forward.go).
		w.Header().Set(headerBusy, "1")
	}
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, wire.Error{Error: msg, Code: code})
}

// writeUnknownOutcome answers a request that may or may not have taken
// effect (504 outcome_unknown), saying why: every such path uses it.
func writeUnknownOutcome(w http.ResponseWriter, why string) {
	writeError(w, wire.CodeOutcomeUnknown, why+msgUnknownOutcome)
}

// nothingDone reports whether err from a proposal or a leader check means
// that nothing was done.
func nothingDone(err error) bool {
	return errors.Is(err, raftnode.ErrNotLeader) || errors.Is(err, raftnode.ErrNotCommitted) || errors.Is(err, raftnode.ErrShutdown)
}

// refusal is a request the API refuses itself, with the code and sentence
// the client gets: a cluster member that does not exist, a backup that is
// not one.
type refusal struct {
	code string
	msg  string
}

func (e *refusal) Error() string { return e.msg }

func refuse(code, format string, args ...any) error {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// badRequest is an input error found before anything was proposed: 400
// invalid naming the field, or 413 too_large.
type badRequest struct {
	field  string
	reason string
	tooBig bool
}

func (e *badRequest) Error() string {
	if e.field == "" {
		return e.reason
	}
	return e.field + ": " + e.reason
}

func (e *badRequest) code() string {
	if e.tooBig {
		return wire.CodeTooLarge
	}
	return wire.CodeInvalid
}

func invalid(field, format string, args ...any) error {
	return &badRequest{field: field, reason: fmt.Sprintf(format, args...)}
}
