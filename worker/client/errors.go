package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sentinel errors. An *APIError matches the one for its status with errors.Is.
var (
	// ErrNotFound matches a 404 reply: unknown job or worker.
	ErrNotFound = errors.New("client: not found")
	// ErrConflict matches a 409 reply: a stale lease or a conflicting state.
	ErrConflict = errors.New("client: conflict")
	// ErrUnavailable matches 502, 503 and 504 replies: no leader, or the
	// node could not reach it.
	ErrUnavailable = errors.New("client: server unavailable")
	// ErrIncompleteReply is wrapped by the error of a 2xx reply whose body
	// was empty or cut short: the request may or may not have taken effect,
	// as after a connection that broke once the request was sent.
	ErrIncompleteReply = errors.New("client: empty or incomplete reply")
	// ErrEmptyID is returned, without a request, when a job or worker id is "".
	ErrEmptyID = errors.New("client: empty id")
)

// APIError is a reply outside 2xx. Code and Message come from the wire.Error
// body; when the body was not one, Code is "" and Message holds the start of
// the body or the status text.
type APIError struct {
	Status  int    // HTTP status code
	Code    string // machine word, such as "not_found" or "stale_lease"
	Message string // human sentence
	// RetryAfter is the server's Retry-After hint, zero when absent.
	RetryAfter time.Duration
}

// Error returns "client: <status> <code>: <message>".
func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	return fmt.Sprintf("client: %d %s: %s", e.Status, code, e.Message)
}

// Is reports whether target is the sentinel for e's status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrUnavailable:
		return unavailable(e.Status)
	}
	return false
}

// IsNotFound reports whether err is or wraps a 404 reply.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err is or wraps a 409 reply.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsUnavailable reports whether err is or wraps a 502, 503 or 504 reply.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// StatusOf returns the HTTP status of the *APIError in err's chain, or 0 when
// there is none (a transport error, a cancelled context).
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

func unavailable(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable ||
		status == http.StatusGatewayTimeout
}
