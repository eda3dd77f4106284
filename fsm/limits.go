package fsm

import (
	"fmt"
	"strings"
)

// MaxKeyBytes is the longest id, name or key a command may carry where the
// store keeps it as a key: bbolt's own limit (bolt.MaxKeySize). The API's
// limits are far lower; this one only keeps a hand-made or corrupt command
// from failing a store write half way, which would stop the node.
const MaxKeyBytes = 32768

// checkKeys rejects a command whose ids, names or keys the store could not
// write (empty, or longer than MaxKeyBytes). It refuses exactly what would
// otherwise fail a store write and stop the node, so a node that checks and
// one that does not agree on every entry that either applies.
func checkKeys(c *Cmd) error {
	switch c.Op {
	case OpSubmit:
		for i := range c.Submit.Jobs {
			nj := &c.Submit.Jobs[i]
			// The three may be empty, so only a long one fails: name the
			// fields (an allocation each) only then.
			if len(nj.ID) <= MaxKeyBytes && len(nj.IdempotencyKey) <= MaxKeyBytes && len(nj.ConcurrencyKey) <= MaxKeyBytes {
				continue
			}
			if err := keyLen(fmt.Sprintf("jobs[%d].id", i), nj.ID, true); err != nil {
				return err
			}
			if err := keyLen(fmt.Sprintf("jobs[%d].idempotency_key", i), nj.IdempotencyKey, true); err != nil {
				return err
			}
			if err := keyLen(fmt.Sprintf("jobs[%d].concurrency_key", i), nj.ConcurrencyKey, true); err != nil {
				return err
			}
		}
	case OpSubmitGang:
		if c.SubmitGang.Job.ConcurrencyKey != "" {
			return &ValidationError{Field: "job.concurrency_key", Reason: "a gang's tasks take no concurrency key"}
		}
		if err := keyLen("job.id", c.SubmitGang.Job.ID, true); err != nil {
			return err
		}
		return keyLen("job.idempotency_key", c.SubmitGang.Job.IdempotencyKey, true)
	case OpClaim:
		return keyLen("worker_id", c.Claim.WorkerID, true)
	case OpWorkerHeartbeat:
		return keyLen("worker_id", c.WorkerHeartbeat.WorkerID, true)
	case OpRegister:
		return keyLen("id", c.Register.Worker.ID, true)
	case OpSetNode:
		return keyLen("node.id", c.Node.ID, false)
	case OpPauseQueue:
		return keyLen("name", c.Queue.Name, true)
	case OpPutSchedule:
		if c.PutSchedule.Job.ConcurrencyKey != "" {
			return &ValidationError{Field: "job.concurrency_key", Reason: "a schedule's jobs take no concurrency key"}
		}
		return keyLen("name", c.PutSchedule.Name, true)
	case OpSetQueueLimits:
		return keyLen("name", c.QueueLimits.Name, true)
	case OpLiftPauses:
		if err := keyLen("queue", c.LiftPauses.Queue, false); err != nil {
			return err
		}
		return keyLen("key", c.LiftPauses.Key, true)
	case OpFire:
		return keyLen("job", c.Fire.JobID, true)
	case OpRecordStep:
		return keyLen("job", c.RecordStep.JobID, false)
	case OpSleepStep:
		return keyLen("job", c.SleepStep.JobID, false)
	case OpWaitStep:
		return keyLen("job", c.WaitStep.JobID, false)
	case OpInvokeStep:
		if err := keyLen("job", c.InvokeStep.JobID, false); err != nil {
			return err
		}
		if err := keyLen("job.id", c.InvokeStep.Child.ID, true); err != nil {
			return err
		}
		return keyLen("job.idempotency_key", c.InvokeStep.Child.IdempotencyKey, true)
	case OpSendEvent:
		return keyLen("job", c.SendEvent.JobID, true)
	}
	return nil
}

// keyLen checks one key's length; mayBeEmpty leaves the empty case to the
// command's own rules.
func keyLen(field, key string, mayBeEmpty bool) error {
	switch {
	case key == "" && !mayBeEmpty:
		return &ValidationError{Field: field, Reason: "must not be empty"}
	case len(key) > MaxKeyBytes:
		return &ValidationError{Field: field, Reason: fmt.Sprintf("%.32s… is longer than %d bytes", strings.ToValidUTF8(key, "?"), MaxKeyBytes)}
	}
	return nil
}
