package api

import (
	"errors"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/cronspec"
)

// newSchedule validates a schedule request into its command. pathName is
// the name in the URL (PUT), or "" (POST: the body names it).
func (s *Server) newSchedule(req *wire.ScheduleRequest, pathName string) (*fsm.PutSchedule, error) {
	name := req.Name
	if pathName != "" {
		if name != "" && name != pathName {
			return nil, invalid("name", "%q does not match the name in the URL, %q", name, pathName)
		}
		name = pathName
	}
	if err := validName("name", name); err != nil {
		return nil, err
	}
	tz := req.Timezone
	if tz == "" {
		tz = "UTC"
	}
	spec, err := cronspec.Parse(req.Cron, tz)
	if ce := (*cronspec.Error)(nil); errors.As(err, &ce) {
		return nil, invalid(ce.Field, "%s", ce.Reason)
	} else if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	if spec.Next(now).IsZero() {
		return nil, invalid("cron", "%q never fires", req.Cron)
	}
	overlap := req.Overlap
	switch overlap {
	case "":
		overlap = fsm.OverlapAllow
	case fsm.OverlapAllow, fsm.OverlapSkip, fsm.OverlapQueue:
	default:
		return nil, invalid("overlap", "%q is not allow, skip or queue", req.Overlap)
	}
	catchup := req.Catchup
	switch catchup {
	case "":
		catchup = fsm.CatchupOne
	case fsm.CatchupNone, fsm.CatchupOne, fsm.CatchupAll:
	default:
		return nil, invalid("catchup", "%q is not none, one or all", req.Catchup)
	}
	nj, err := scheduleJob(&req.Job, now, s.cfg.Retention)
	if err != nil {
		return nil, err
	}
	return &fsm.PutSchedule{
		Name:     name,
		Cron:     strings.TrimSpace(req.Cron),
		Timezone: tz,
		Job:      nj,
		Overlap:  overlap,
		Catchup:  catchup,
		Paused:   req.Paused,
	}, nil
}

// scheduleJob validates a schedule's job template with the rules of a
// submission, less the fields that make no sense for a recurring job.
func scheduleJob(req *wire.SubmitRequest, now time.Time, retention time.Duration) (fsm.NewJob, error) {
	switch {
	case req.RunAt != nil:
		return fsm.NewJob{}, invalid("job.run_at", "a scheduled job runs at its tick")
	case req.Delay != "":
		return fsm.NewJob{}, invalid("job.delay", "a scheduled job runs at its tick")
	case req.IdempotencyKey != "":
		return fsm.NewJob{}, invalid("job.idempotency_key", "a schedule's jobs are already unique: one per tick")
	case req.UniqueFor != "":
		return fsm.NewJob{}, invalid("job.unique_for", "a schedule's jobs are already unique: one per tick")
	case len(req.DependsOn) > 0:
		return fsm.NewJob{}, invalid("job.depends_on", "a schedule's jobs cannot depend on other jobs (overlap \"queue\" chains them)")
	case req.ConcurrencyKey != "":
		return fsm.NewJob{}, invalid("job.concurrency_key", "a schedule's jobs take no concurrency key")
	}
	return newJob(req, fieldIn("job."), now, retention)
}
