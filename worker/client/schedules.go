package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/workron/workron/api/wire"
)

// CreateSchedule creates the schedule req.Name (POST /schedules) and
// returns it with its next run. A name in use is a conflict (IsConflict); a
// bad cron expression, time zone or job is a 400 naming the field
// (ErrInvalid).
func (c *Client) CreateSchedule(ctx context.Context, req wire.ScheduleRequest) (*wire.Schedule, error) {
	var out wire.Schedule
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/schedules", body: req, out: &out}); err != nil {
		return nil, fmt.Errorf("create schedule %s: %w", req.Name, err)
	}
	return &out, nil
}

// UpdateSchedule changes the schedule req.Name (PUT /schedules/{name}) and
// returns it. The server changes only the fields req sends: zero fields
// are left out of the JSON (and an empty Cron is ignored), so they keep
// their current values, Paused included (use PauseSchedule and
// ResumeSchedule). Sending the same update twice is harmless, so it is
// resent.
func (c *Client) UpdateSchedule(ctx context.Context, req wire.ScheduleRequest) (*wire.Schedule, error) {
	if req.Name == "" {
		return nil, fmt.Errorf("update schedule: %w", ErrEmptyID)
	}
	var out wire.Schedule
	_, err := c.do(ctx, call{method: http.MethodPut, path: schedulePath(req.Name, ""), body: req, out: &out, idempotent: true})
	if err != nil {
		return nil, fmt.Errorf("update schedule %s: %w", req.Name, err)
	}
	return &out, nil
}

// ScheduleList returns one page of the schedules, in name order (GET
// /schedules); its NextCursor is "" after the last.
func (c *Client) ScheduleList(ctx context.Context, page Page) (*wire.ScheduleList, error) {
	var out wire.ScheduleList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/schedules", query: page.query(), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return &out, nil
}

// Schedules lists every schedule: ScheduleList's pages of 1000, followed
// to the last.
func (c *Client) Schedules(ctx context.Context) ([]wire.Schedule, error) {
	return followPages(ctx, func(ctx context.Context, p Page) ([]wire.Schedule, string, error) {
		out, err := c.ScheduleList(ctx, p)
		if err != nil {
			return nil, "", err
		}
		return out.Schedules, out.NextCursor, nil
	})
}

// Schedule returns one schedule (GET /schedules/{name}); an unknown name
// gives IsNotFound.
func (c *Client) Schedule(ctx context.Context, name string) (*wire.Schedule, error) {
	if name == "" {
		return nil, fmt.Errorf("get schedule: %w", ErrEmptyID)
	}
	var out wire.Schedule
	if _, err := c.do(ctx, call{method: http.MethodGet, path: schedulePath(name, ""), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", name, err)
	}
	return &out, nil
}

// DeleteSchedule deletes a schedule (DELETE /schedules/{name}); the jobs it
// created stay. An unknown name gives IsNotFound.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("delete schedule: %w", ErrEmptyID)
	}
	if _, err := c.do(ctx, call{method: http.MethodDelete, path: schedulePath(name, "")}); err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, err)
	}
	return nil
}

// PauseSchedule stops a schedule's ticks (POST /schedules/{name}/pause) and
// returns it. Pausing twice is harmless, so it is resent.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*wire.Schedule, error) {
	return c.scheduleAction(ctx, name, "pause")
}

// ResumeSchedule starts a paused schedule's ticks again (POST
// /schedules/{name}/resume) and returns it.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*wire.Schedule, error) {
	return c.scheduleAction(ctx, name, "resume")
}

func (c *Client) scheduleAction(ctx context.Context, name, action string) (*wire.Schedule, error) {
	if name == "" {
		return nil, fmt.Errorf("%s schedule: %w", action, ErrEmptyID)
	}
	var out wire.Schedule
	_, err := c.do(ctx, call{method: http.MethodPost, path: schedulePath(name, action), out: &out, idempotent: true})
	if err != nil {
		return nil, fmt.Errorf("%s schedule %s: %w", action, name, err)
	}
	return &out, nil
}

// TriggerSchedule runs a schedule once now, outside its ticks (POST
// /schedules/{name}/trigger), and returns the job it created. A schedule
// that skips overlapping runs while its previous run is unfinished gives
// IsConflict. It is not resent once the request may have reached a server:
// each trigger creates a job.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*wire.Job, error) {
	if name == "" {
		return nil, fmt.Errorf("trigger schedule: %w", ErrEmptyID)
	}
	var out wire.Job
	if _, err := c.do(ctx, call{method: http.MethodPost, path: schedulePath(name, "trigger"), out: &out}); err != nil {
		return nil, fmt.Errorf("trigger schedule %s: %w", name, err)
	}
	return &out, nil
}

// schedulePath returns /schedules/{name}[/action] with name escaped.
func schedulePath(name, action string) string {
	p := "/schedules/" + url.PathEscape(name)
	if action != "" {
		p += "/" + action
	}
	return p
}
