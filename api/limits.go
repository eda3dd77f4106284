package api

import (
	"context"
	"errors"

	"github.com/workron/workron/store"
)

// errTooManyLongPolls means a claim wanted to wait while Config.MaxLongPolls
// claims already waited on this node, and no job was ready: 429.
var errTooManyLongPolls = errors.New("api: too many long-polling claims")

// boundedClaim is claim with Config.MaxLongPolls applied: a claim that would
// wait while every slot is taken does not wait. It still takes a job that is
// ready now; with none it returns errTooManyLongPolls, so the worker backs
// off instead of polling again at once.
func (s *Server) boundedClaim(ctx context.Context, a claimArgs) ([]*store.Job, error) {
	if a.wait <= 0 {
		return s.claim(ctx, a)
	}
	select {
	case s.polls <- struct{}{}:
		defer func() { <-s.polls }()
		return s.claim(ctx, a)
	default:
	}
	a.wait = 0
	jobs, err := s.claim(ctx, a)
	if err != nil || len(jobs) > 0 {
		return jobs, err
	}
	return nil, errTooManyLongPolls
}
