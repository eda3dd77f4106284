package fsm

// Changing a job's priority (a bulk priority action, bulk.go): the job
// keeps its place in every index but the ready order, which it takes
// again under its new priority.

import "github.com/workron/workron/store"

// setPriority gives j, a job not yet finished, priority p. A finished job
// or a gang's task (whose gang holds the priority it is placed by) gets a
// *StateError and stays as it is.
func (a *applier) setPriority(j *store.Job, p int) error {
	switch {
	case j.Status.Finished():
		return &StateError{JobID: j.ID, Status: string(j.Status), Op: "change the priority of"}
	case j.GangID != "":
		return &StateError{JobID: j.ID, Status: "a task of gang " + j.GangID, Op: "change the priority of"}
	case j.Priority == p:
		return nil
	}
	prev := j.Status
	a.unindex(j)
	j.Priority = p
	a.put(j, prev)
	return nil
}
