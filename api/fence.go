package api

import (
	"context"
	"net/http"
	"time"

	"github.com/workron/workron/fsm"
)

// fence is what a worker's command carries in the fields of
// fsm.ProtocolFence: who calls (the token's name, empty with auth off) and
// whether those fields may be set at all. While they are not (on false),
// every command encodes as before that protocol, and the FSM applies the
// v0 worker API's rules: any token, a lease optional.
type fence struct {
	on    bool
	token string
	fair  bool // claims take turns over keys (fsm.ProtocolFair)
	// chunked: a failure's cascade goes in chunks (fsm.ProtocolCascade)
	chunked bool
	// capped puts a report's rate limit or snooze under the bounds of
	// fsm.ProtocolPauses (a key's pause, at most the queue's max_pause).
	capped bool
	// maxWorkers is the cap on the token's active worker ids that
	// registers and claims carry (fsm.ProtocolWorkerCap; 0: none yet).
	maxWorkers int
	ack        bool // claimed attempts await their worker's acknowledgement (fsm.ProtocolAck)
	// maxClaimBytes is the byte budget of a claim's jobs
	// (fsm.ProtocolClaimBytes; 0: none yet).
	maxClaimBytes int64
}

// fenceFields is the one place that decides the fields of
// fsm.ProtocolFence for a request's commands: set once every member of the
// cluster runs that protocol (an older node would stop at them), left empty
// while an upgrade is under way. A member whose protocol is not known yet
// makes it wait (raftnode.Node.AwaitProtocol), rather than leave a claim
// unfenced.
func (s *Server) fenceFields(r *http.Request) fence {
	p := s.node.AwaitProtocol(r.Context())
	f := fence{on: p >= fsm.ProtocolFence, token: tokenName(r.Context()), fair: p >= fsm.ProtocolFair,
		chunked: p >= fsm.ProtocolCascade, capped: p >= fsm.ProtocolPauses,
		ack: p >= fsm.ProtocolAck}
	if p >= fsm.ProtocolWorkerCap {
		f.maxWorkers = s.cfg.MaxWorkersPerToken
	}
	if p >= fsm.ProtocolClaimBytes {
		f.maxClaimBytes = fsm.DefaultMaxClaimBytes
	}
	return f
}

// claim marks a claim with its caller; leased says its reply hands the
// worker the lease (POST /jobs/claim, not the v0 worker API's GET /jobs/next), and
// seq is the worker's number for the request.
func (f fence) claim(c *fsm.Claim, leased bool, seq uint64) {
	if f.on {
		c.Token, c.Fenced, c.Seq = f.token, leased, seq
	}
	c.Fair, c.MaxWorkers, c.Ack, c.MaxBytes = f.fair, f.maxWorkers, f.ack, f.maxClaimBytes
}

// heartbeat marks a job heartbeat with its caller.
func (f fence) heartbeat(h *fsm.Heartbeat) {
	if f.on {
		h.Token = f.token
	}
}

// workerHeartbeat marks a worker heartbeat with its caller and the range
// of claim numbers whose requests had ended when the worker sent it.
func (f fence) workerHeartbeat(h *fsm.WorkerHeartbeat, claimsFrom, claimsTo uint64) {
	if f.on {
		h.Token, h.ClaimsFrom, h.ClaimsTo = f.token, claimsFrom, claimsTo
	}
}

// report marks a report with its caller, a failure's to cascade in
// chunks, and a rate-limited or snoozed one with the bounds of
// fsm.ProtocolPauses once every node applies them.
func (f fence) report(r *fsm.Report) {
	if f.on {
		r.Token = f.token
	}
	r.Chunked = f.chunked && !r.Success
	r.Capped = f.capped && (r.RateLimitedFor != 0 || r.SnoozeFor != 0)
}

// register marks a registration with its caller.
func (f fence) register(r *fsm.Register) {
	if f.on {
		r.Token = f.token
	}
	r.MaxWorkers = f.maxWorkers
}

// gangCall marks a checkpoint or preemption acknowledgement with its
// caller.
func (f fence) gangCall(token *string) {
	if f.on {
		*token = f.token
	}
}

// releaseSilentID lets a token take over a worker id that another token
// holds when the worker has gone silent: the FSM gives an id to a new token
// only once its worker is declared offline, and the leader's admission loop
// declares offline only workers that hold work. So when this leader has not
// heard from the worker for its liveness OfflineAfter, it proposes that
// declaration first, as the admission loop would. Errors are dropped: the
// register that follows is refused if the id is still held.
func (s *Server) releaseSilentID(ctx context.Context, id, token string) {
	if token == "" {
		return
	}
	wk, err := s.state.Worker(id)
	if err != nil || wk.Owner == "" || wk.Owner == token || wk.Offline() || s.live.Active(wk, s.cfg.Now()) {
		return
	}
	op := fsm.OpWorkerOffline
	if s.node.AwaitProtocol(ctx) >= fsm.ProtocolCascade {
		op = fsm.OpWorkerOfflineChunked // its failures cascade in chunks
	}
	cmd := fsm.Cmd{Op: op, WorkerOffline: &fsm.WorkerOffline{WorkerID: wk.ID, SeenAt: wk.LastHeartbeat, Draw: draw()}}
	if _, err := s.propose(ctx, cmd); err == nil {
		s.logger.Warn("worker offline: another token registers its id", "worker", wk.ID, "last_seen", s.live.LastSeen(wk), "request_id", requestID(ctx))
	}
}

// releaseSilentWorker frees one of owner's active worker ids for a
// register refused at the cap (fsm.TooManyWorkersError): the first, in id
// order, that this leader has not heard from for its liveness OfflineAfter
// is declared offline, as the admission loop would declare a busy one. The
// FSM counts a worker active until it is declared offline, and idle
// workers poll without writing to the log, so only a node that saw their
// polls can tell which are gone. It reads at most the cap's worker records
// and reports whether one was freed.
//
// A scan that found no silent id is not made again for the same owner
// within silentScanEvery, so a flood of registrations past the cap costs
// one scan a second, not one a request.
func (s *Server) releaseSilentWorker(ctx context.Context, owner string) bool {
	now := s.cfg.Now()
	s.silentMu.Lock()
	if last, ok := s.silentEmpty[owner]; ok && now.Sub(last) < silentScanEvery && now.After(last) {
		s.silentMu.Unlock()
		return false
	}
	s.silentMu.Unlock()
	for _, id := range s.state.ActiveWorkerIDs(owner) {
		wk, err := s.state.Worker(id)
		if err != nil || wk.Offline() || s.live.Active(wk, now) {
			continue
		}
		op := fsm.OpWorkerOffline
		if s.node.AwaitProtocol(ctx) >= fsm.ProtocolCascade {
			op = fsm.OpWorkerOfflineChunked // its failures cascade in chunks
		}
		cmd := fsm.Cmd{Op: op, WorkerOffline: &fsm.WorkerOffline{WorkerID: wk.ID, SeenAt: wk.LastHeartbeat, Draw: draw()}}
		if _, err := s.propose(ctx, cmd); err == nil {
			s.logger.Warn("worker offline: its token is at its cap of worker ids", "worker", wk.ID, "last_seen", s.live.LastSeen(wk), "request_id", requestID(ctx))
			return true
		}
	}
	s.silentMu.Lock()
	if s.silentEmpty == nil {
		s.silentEmpty = make(map[string]time.Time)
	}
	s.silentEmpty[owner] = now // one entry a token (and "" without tokens)
	s.silentMu.Unlock()
	return false
}

// silentScanEvery is how often releaseSilentWorker looks again for an
// owner whose last scan found no silent id.
const silentScanEvery = time.Second
