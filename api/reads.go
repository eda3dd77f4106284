package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/traceparent"
)

// Reads are served by the node asked, from its own applied state, so list
// and search load spreads over every node instead of landing on the
// leader. A read is consistent by default (linearizable, as when the
// leader served every read): this node learns the leader's commit index,
// confirmed by the leader with a quorum after the request arrived (the
// read index; a leader confirms its own), waits until it has applied that
// far, then serves. Every write acknowledged before the request is then in
// the state it reads, wherever it was made. ?stale=1 serves at once, asking
// no one. Either way the reply states the index the state stood at and the
// leader's commit index (wire.HeaderAppliedIndex, wire.HeaderLeaderCommit).
//
// A consistent read never falls back to serving stale: a node that cannot
// learn the read index, or cannot apply that far, within --leader-wait
// answers 503 (no_leader, catching_up). Against a leader of an older
// release, which has no GET /cluster/read_index, the read is forwarded to
// the leader as that release did.

// readRoute wraps a read handler as the paragraph above says.
func (s *Server) readRoute(h http.HandlerFunc) http.HandlerFunc {
	forwarded := s.leaderRead(h) // an older leader's way
	return func(w http.ResponseWriter, r *http.Request) {
		stale, err := staleRead(r.URL.Query())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if stale {
			s.serveRead(w, r, h, s.node.CommitIndex())
			return
		}
		until := time.Now().Add(s.readWait())
		index, err := s.readIndex(r, until)
		if errors.Is(err, errNoReadIndex) {
			forwarded(w, r)
			return
		}
		if err == nil {
			err = s.awaitApplied(r.Context(), index, until)
		}
		if err != nil {
			if r.Context().Err() != nil {
				return // the client is gone
			}
			s.stateHeaders(w, index)
			s.fail(w, r, err)
			return
		}
		s.serveRead(w, r, h, index)
	}
}

// readWait bounds a consistent read's wait for the read index and for this
// node to apply that far: --leader-wait, but at least minReadWait (a
// leadership check and the entries' way to this node take some time).
func (s *Server) readWait() time.Duration { return max(s.cfg.LeaderWait, minReadWait) }

const minReadWait = time.Second

// staleRead reads ?stale: true (1, true) serves this node's state as it
// is; false or absent, a consistent read.
func staleRead(q url.Values) (bool, error) {
	v := q.Get("stale")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid("stale", "%q is not true, false, 1 or 0", v)
	}
	return b, nil
}

// serveRead serves a read from this node's state, stating its freshness.
func (s *Server) serveRead(w http.ResponseWriter, r *http.Request, h http.HandlerFunc, leaderCommit uint64) {
	s.stateHeaders(w, leaderCommit)
	h(w, r)
}

// stateHeaders sets the headers that state a read's freshness: this node's
// applied index now (the state read next is at least there) and the
// leader's commit index, when known (not 0).
func (s *Server) stateHeaders(w http.ResponseWriter, leaderCommit uint64) {
	h := w.Header()
	h.Set(wire.HeaderAppliedIndex, strconv.FormatUint(s.node.AppliedIndex(), 10))
	if leaderCommit > 0 {
		h.Set(wire.HeaderLeaderCommit, strconv.FormatUint(leaderCommit, 10))
	}
}

// errNoReadIndex is a leader that does not serve GET /cluster/read_index
// (an older release): the read is forwarded to it instead.
var errNoReadIndex = errors.New("api: the leader serves no read index")

// errRetryReadIndex is a failure to learn the read index that a new
// leader, or a moment, may mend: nothing was read.
var errRetryReadIndex = errors.New("api: no read index yet")

// readIndex learns the leader's commit index for a consistent read: its
// own after a leadership check with a quorum when this node leads, else
// the leader's through GET /cluster/read_index. While no leader is known,
// or the leader cannot be reached or says it no longer leads, it waits for
// a leader change (or a moment) and asks again, until until.
func (s *Server) readIndex(r *http.Request, until time.Time) (uint64, error) {
	ctx, cancel := context.WithDeadline(r.Context(), until)
	defer cancel()
	var last error
	for {
		if s.node.Removed() {
			return 0, refuse(wire.CodeRemoved, "%s", s.removedMessage())
		}
		addressWanted := false
		var (
			index uint64
			err   error
		)
		if s.node.IsLeader() {
			index, err = s.ownReadIndex(ctx)
		} else if target, ok := s.leaderURL(); ok {
			index, err = s.askReadIndex(ctx, r, target)
		} else {
			addressWanted = true
			err = fmt.Errorf("%w: this node knows no leader", errRetryReadIndex)
		}
		if !errors.Is(err, errRetryReadIndex) {
			return index, err
		}
		last = err
		if !s.awaitLeaderChange(ctx, until, addressWanted) {
			if r.Context().Err() != nil {
				return 0, r.Context().Err()
			}
			return 0, refuse(wire.CodeNoLeader,
				"a consistent read needs the leader's commit index, and none could be had within %s (--leader-wait): %v; "+
					"nothing was done: retry, or read this node's state as it is with ?stale=1", s.readWait(), last)
		}
	}
}

// ownReadIndex is this node's commit index once a quorum confirmed it
// leads, and it applied every entry of earlier terms (VerifyLeader).
func (s *Server) ownReadIndex(ctx context.Context) (uint64, error) {
	if err := s.node.VerifyLeader(ctx); err != nil {
		if nothingDone(err) || ctx.Err() != nil {
			return 0, fmt.Errorf("%w: confirm the leadership with a quorum: %w", errRetryReadIndex, err)
		}
		return 0, err
	}
	return s.node.CommitIndex(), nil
}

// maxReadIndexReply bounds the reply of GET /cluster/read_index read.
const maxReadIndexReply = 4 << 10

// askReadIndex asks the leader at target for its read index, with the
// client's credentials: the leader checks them as it would the read's.
func (s *Server) askReadIndex(ctx context.Context, r *http.Request, target *url.URL) (uint64, error) {
	u := target.JoinPath("/cluster/read_index")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("ask the leader for its read index: %w", err)
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	req.Header.Set(headerForwarded, s.node.ID())
	req.Header.Set(headerRequestID, requestID(ctx))
	if s.tracer != nil {
		traceparent.Inject(ctx, req.Header)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: ask the leader at %s: %w", errRetryReadIndex, target.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReadIndexReply))
	if err != nil {
		return 0, fmt.Errorf("%w: read the leader's read index: %w", errRetryReadIndex, err)
	}
	if resp.StatusCode == http.StatusOK {
		var ri wire.ReadIndex
		if err := json.Unmarshal(body, &ri); err != nil || ri.CommitIndex == 0 {
			return 0, fmt.Errorf("the leader at %s answered its read index with %.200q", target.Host, body)
		}
		return ri.CommitIndex, nil
	}
	var we wire.Error
	_ = json.Unmarshal(body, &we)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return 0, errNoReadIndex
	case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return 0, fmt.Errorf("%w: the leader at %s answered %d %s", errRetryReadIndex, target.Host, resp.StatusCode, we.Code)
	case we.Code != "":
		// The leader refused the client's credentials, or failed: the
		// client hears what it said.
		return 0, refuse(we.Code, "the leader refused this read's index: %s", we.Error)
	}
	return 0, fmt.Errorf("the leader at %s answered its read index with HTTP %d", target.Host, resp.StatusCode)
}

// handleReadIndex serves GET /cluster/read_index on the leader: its commit
// index once a quorum confirmed it leads (within --leader-wait). Another
// node answers 503 no_leader at once: the asking node finds the leader.
func (s *Server) handleReadIndex(w http.ResponseWriter, r *http.Request) {
	if !s.node.IsLeader() {
		writeError(w, wire.CodeNoLeader, "this node does not lead: ask the leader for its read index")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.readWait())
	defer cancel()
	index, err := s.ownReadIndex(ctx)
	if err != nil {
		if errors.Is(err, errRetryReadIndex) {
			writeError(w, wire.CodeNoLeader, err.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ReadIndex{NodeID: s.node.ID(), CommitIndex: index})
}

// awaitApplied waits until this node has applied index, or until until:
// then 503 catching_up. It looks often at first (the entries are usually
// a heartbeat away), then every readPoll.
func (s *Server) awaitApplied(ctx context.Context, index uint64, until time.Time) error {
	d := time.Millisecond
	for {
		applied := s.node.AppliedIndex()
		if applied >= index {
			return nil
		}
		left := time.Until(until)
		if left <= 0 {
			return refuse(wire.CodeCatchingUp,
				"this node has applied the log up to index %d, short of the leader's commit index %d, after waiting %s (--leader-wait); "+
					"nothing was done: retry (another node may be ahead), or read this node's state as it is with ?stale=1",
				applied, index, s.readWait())
		}
		t := time.NewTimer(min(d, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		d = min(2*d, readPoll)
	}
}

// readPoll is the longest awaitApplied waits between looks.
const readPoll = 10 * time.Millisecond
