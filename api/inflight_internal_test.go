package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestBodyBudget: the bytes of the bodies a node holds are bounded; a
// request beyond the budget gets 503 busy with Retry-After, its body
// unread, and the budget admits again once the bodies it holds are
// answered. Before it, 30 parallel 32 MiB report batches took a follower
// to 2.3 GB (issue #28).
func TestBodyBudget(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	budget := &e.srv.budget
	if budget.max != DefaultConfig().MaxBodyBytesInFlight {
		t.Fatalf("budget %d, want the default %d", budget.max, DefaultConfig().MaxBodyBytesInFlight)
	}
	h := contractHandler(t, e.srv.Handler())
	submit := `{"command":"true"}`
	send := func(body string, length int64) (*httptest.ResponseRecorder, *countingReader) {
		t.Helper()
		rd := &countingReader{r: strings.NewReader(body)}
		req := httptest.NewRequest(http.MethodPost, "/jobs", rd)
		req.ContentLength = length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, rd
	}
	// contractHandler reads the body to check it against the API's
	// contract: the server's own reads are what its reply shows.
	direct := func(body string, length int64) (*httptest.ResponseRecorder, *countingReader) {
		t.Helper()
		rd := &countingReader{r: strings.NewReader(body)}
		req := httptest.NewRequest(http.MethodPost, "/jobs", rd)
		req.ContentLength = length
		rec := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(rec, req)
		return rec, rd
	}
	wantBusy := func(t *testing.T, rec *httptest.ResponseRecorder) {
		t.Helper()
		var werr wire.Error
		_ = json.Unmarshal(rec.Body.Bytes(), &werr)
		if rec.Code != http.StatusServiceUnavailable || werr.Code != wire.CodeBusy || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("got %d %+v (Retry-After %q), want 503 busy with Retry-After", rec.Code, werr, rec.Header().Get("Retry-After"))
		}
	}

	t.Run("AFullBudgetRefusesWithoutReadingTheBody", func(t *testing.T) {
		room := int64(len(submit)) - 1
		budget.take(budget.max - room)
		defer budget.give(budget.max - room)
		rec, _ := send(submit, int64(len(submit)))
		wantBusy(t, rec)
		rec, rd := direct(submit, int64(len(submit)))
		wantBusy(t, rec)
		if rd.n != 0 {
			t.Errorf("read %d bytes of a refused body, want none", rd.n)
		}
	})

	t.Run("ItAdmitsAgainOnceTheBodiesAreAnswered", func(t *testing.T) {
		if rec, _ := send(submit, int64(len(submit))); rec.Code != http.StatusCreated {
			t.Fatalf("got %d %s, want 201", rec.Code, rec.Body)
		}
		if used := budget.used.Load(); used != 0 {
			t.Fatalf("%d bytes still held after the request was answered", used)
		}
	})

	t.Run("AChunkedBodyTakesTheBudgetAsItIsRead", func(t *testing.T) {
		room := int64(bodyChunk) + 10
		budget.take(budget.max - room)
		defer budget.give(budget.max - room)
		big := `{"command":"true","metadata":{"k":"` + strings.Repeat("v", 2*bodyChunk) + `"}}`
		rec, rd := direct(big, -1)
		wantBusy(t, rec)
		if rd.n > int(room)+bodyChunk {
			t.Errorf("read %d bytes of the body, want at most what the budget had room for", rd.n)
		}
		if rec, _ := direct(submit, -1); rec.Code != http.StatusCreated {
			t.Fatalf("a small chunked body: %d %s, want 201", rec.Code, rec.Body)
		}
		if used := budget.used.Load(); used != budget.max-room {
			t.Fatalf("the chunked bodies left %d bytes held", used-(budget.max-room))
		}
	})

	t.Run("ABodyOverItsLimitIsRefusedUnread", func(t *testing.T) {
		rec, rd := direct(submit, e.srv.cfg.MaxBodyBytes+1)
		if rec.Code != http.StatusRequestEntityTooLarge || rd.n != 0 {
			t.Fatalf("got %d having read %d bytes, want 413 having read none", rec.Code, rd.n)
		}
	})

	t.Run("ARequestHoldsItsShareUntilAnswered", func(t *testing.T) {
		entered, answer, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		route := e.srv.leaderRoute(e.srv.cfg.MaxBodyBytes, true, func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-answer
			w.WriteHeader(http.StatusNoContent)
		})
		go func() {
			defer close(done)
			route(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/jobs", strings.NewReader(submit)))
		}()
		<-entered
		if used := budget.used.Load(); used != int64(len(submit)) {
			t.Errorf("%d bytes held while the request is served, want %d", used, len(submit))
		}
		close(answer)
		<-done
		if used := budget.used.Load(); used != 0 {
			t.Errorf("%d bytes held once it was answered, want 0", used)
		}
	})
}

func TestBodyBudgetConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Node, cfg.State, cfg.AdvertiseHTTP = &loneNode{}, newSchedEnv(t, time.Now(), nil).srv.state, "http://127.0.0.1:1"
	cfg.MaxBodyBytesInFlight = cfg.MaxBatchBodyBytes - 1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "MaxBodyBytesInFlight") {
		t.Fatalf("Validate = %v, want MaxBodyBytesInFlight refused below the largest body", err)
	}
}
