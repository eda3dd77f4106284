package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
)

// Sentinel errors. An *Error matches, with errors.Is, the sentinel of its
// status and, for ErrStaleLease, ErrStaleEpoch and ErrOutcomeUnknown, of its
// code.
var (
	// ErrInvalid matches a 400 reply: the request named a bad field; nothing
	// was done.
	ErrInvalid = errors.New("client: invalid request")
	// ErrUnauthorized matches a 401 reply: no token, or one the server does
	// not know.
	ErrUnauthorized = errors.New("client: unauthorized")
	// ErrForbidden matches a 403 reply: the token's role may not make the
	// request, or another worker's token holds the attempt.
	ErrForbidden = errors.New("client: forbidden")
	// ErrNotFound matches a 404 reply: unknown job, worker, gang, queue,
	// schedule or cluster member.
	ErrNotFound = errors.New("client: not found")
	// ErrConflict matches a 409 reply: a stale lease or a conflicting state.
	ErrConflict = errors.New("client: conflict")
	// ErrStaleLease matches a 409 reply with code "stale_lease": the attempt
	// the lease names is no longer current; the report was not recorded.
	ErrStaleLease = errors.New("client: stale lease")
	// ErrStaleEpoch matches a 409 reply with code "stale_epoch": a gang's
	// drain ended without this call.
	ErrStaleEpoch = errors.New("client: stale epoch")
	// ErrTooLarge matches a 413 reply: the body is over the server's cap.
	ErrTooLarge = errors.New("client: request too large")
	// ErrOverloaded matches a 429 reply: the server holds too many long
	// polls; nothing was done, retry after RetryAfter.
	ErrOverloaded = errors.New("client: server overloaded")
	// ErrUnavailable matches 502, 503 and 504 replies: no leader, or the
	// node could not reach it.
	ErrUnavailable = errors.New("client: server unavailable")
	// ErrOutcomeUnknown matches a 504 reply with code "outcome_unknown": the
	// command reached Raft but is not known to be committed; it may have
	// been applied.
	ErrOutcomeUnknown = errors.New("client: outcome unknown")
	// ErrIncompleteReply is wrapped by the error of a 2xx reply whose body
	// was empty or cut short: the request may or may not have taken effect,
	// as after a connection that broke once the request was sent.
	ErrIncompleteReply = errors.New("client: empty or incomplete reply")
	// ErrEmptyID is returned, without a request, when a job or worker id is "".
	ErrEmptyID = errors.New("client: empty id")
)

// Error codes of the wire.Error bodies that the sentinels above match by
// code rather than by status.
const (
	codeStaleLease     = wire.CodeStaleLease
	codeStaleEpoch     = wire.CodeStaleEpoch
	codeOutcomeUnknown = wire.CodeOutcomeUnknown
)

// Error is a reply outside 2xx. Code and Message come from the wire.Error
// body; when the body was not one, Code is "" and Message holds the start of
// the body or the status text. Every failed call of a Client wraps one when
// the server answered.
type Error struct {
	Status  int    // HTTP status code
	Code    string // machine word, such as "not_found" or "stale_lease"
	Message string // the server's sentence
	// RetryAfter is the server's Retry-After hint, zero when absent.
	RetryAfter time.Duration
}

// APIError is the former name of Error, kept for existing callers.
type APIError = Error

// Error returns "client: <status> <code>: <message>", the one format every
// reply outside 2xx takes, with the server's message.
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	return fmt.Sprintf("client: %d %s: %s", e.Status, code, e.Message)
}

// Is reports whether target is the sentinel for e's status or code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return e.Status == http.StatusBadRequest
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrStaleLease:
		return e.Status == http.StatusConflict && e.Code == codeStaleLease
	case ErrStaleEpoch:
		return e.Status == http.StatusConflict && e.Code == codeStaleEpoch
	case ErrTooLarge:
		return e.Status == http.StatusRequestEntityTooLarge
	case ErrOverloaded:
		return e.Status == http.StatusTooManyRequests
	case ErrUnavailable:
		return unavailable(e.Status)
	case ErrOutcomeUnknown:
		return e.Status == http.StatusGatewayTimeout && e.Code == codeOutcomeUnknown
	}
	return false
}

// IsNotFound reports whether err is or wraps a 404 reply.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err is or wraps a 409 reply.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsUnavailable reports whether err is or wraps a 502, 503 or 504 reply.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// StatusOf returns the HTTP status of the *Error in err's chain, or 0 when
// there is none (a transport error, a cancelled context).
func StatusOf(err error) int {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// CodeOf returns the code of the *Error in err's chain, or "" when there is
// none or the body carried no code.
func CodeOf(err error) string {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func unavailable(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable ||
		status == http.StatusGatewayTimeout
}
