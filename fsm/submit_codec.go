package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/workron/workron/internal/binenc"
)

// submitCodec reads the jobs of a coded submit (op codes 1, 11 and 15), or
// writes them (binenc.Codec): its methods are their layout, each field of
// NewJob once, for both. Encode and Decode go through submitWriter's and
// submitReader's, which walkgen generates from them (submit_gen.go), so
// that a field costs no call more than a hand-written codec's;
// TestSubmitCodecIsTheWalk checks that they write and read what the walk
// does. Writing, strings are made valid
// UTF-8 (appendText); reading, they must be, and the names a batch's jobs
// share (types, queues, the keys and values of env and metadata) are read
// through names.
type submitCodec struct {
	binenc.Codec
	names binenc.Interner
}

//go:generate go run ../internal/tools/walkgen -in submit_codec.go -codec submitCodec -writer submitWriter -reader submitReader -out submit_gen.go

// submitWriter writes a submit's jobs through the methods walkgen
// generates from submitCodec's (submit_gen.go).
type submitWriter struct{ binenc.Writer }

// submitReader reads a submit's jobs through the methods walkgen generates
// from submitCodec's (submit_gen.go).
type submitReader struct {
	binenc.FieldReader
	names binenc.Interner
}

func appendSubmit(b []byte, s *Submit) ([]byte, error) {
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if !binenc.Finite(j.Backoff.Jitter) {
			return nil, fmt.Errorf("jobs[%d]: backoff jitter %v is not a number", i, j.Backoff.Jitter)
		}
		if len(j.Payload) > 0 && !json.Valid(j.Payload) {
			return nil, fmt.Errorf("jobs[%d]: payload is not JSON", i)
		}
	}
	traced := s.traced()
	keyed := s.keyed() || traced
	code := codeFor(keyed, opSubmit, opSubmitKeyed)
	if traced {
		code = opSubmitTraced
	}
	var w submitWriter
	return w.jobs(append(b, code), s, keyed, traced), nil
}

// submit reads a submit; keyed (opSubmitKeyed) reads each job's
// ConcurrencyKey after it, and traced (opSubmitTraced) its TraceParent
// after that.
func (r *entryReader) submit(keyed, traced bool) *Submit {
	if r.names == nil {
		r.names = make(binenc.Interner)
	}
	c := submitReader{FieldReader: binenc.FieldReader{R: r.Reader}, names: r.names}
	s := new(Submit)
	c.jobs(s, keyed, traced)
	r.Reader = c.R
	return s
}

// jobs is the count of jobs, then each job, followed by its ConcurrencyKey
// if keyed, then by its TraceParent if traced.
func (c *submitCodec) jobs(s *Submit, keyed, traced bool) {
	n := len(s.Jobs)
	c.Count(&n, minNewJobLen)
	if c.Reading() {
		s.Jobs = nil
		if n > 0 {
			s.Jobs = make([]NewJob, n)
		}
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		c.job(j)
		if keyed {
			c.text(&j.ConcurrencyKey)
		}
		if traced {
			c.text(&j.TraceParent)
		}
		if c.Reading() {
			if c.R.Err() != nil {
				break
			}
		}
	}
}

func (c *submitCodec) job(j *NewJob) {
	c.text(&j.ID)
	c.text(&j.Command)
	c.name(&j.Type)
	c.payload(&j.Payload)
	c.nameMap(&j.Env)
	c.nameMap(&j.Metadata)
	c.name(&j.Queue)
	c.Int(&j.Priority)
	c.texts(&j.DependsOn)
	c.Int(&j.MaxAttempts)
	c.text(&j.IdempotencyKey)
	c.Varint(&j.Timeout)
	c.Varint(&j.Backoff.Base)
	c.Varint(&j.Backoff.Max)
	c.Float(&j.Backoff.Jitter)
	c.Varint(&j.RunAt)
	c.Varint(&j.Retention)
	c.Varint(&j.UniqueFor)
	c.text(&j.Schedule)
	c.Varint(&j.ScheduledFor)
	c.Int(&j.Resources.VRAMMB)
	c.Int(&j.Resources.MemoryMB)
	c.Int(&j.Resources.CPUMillis)
	c.Int(&j.Resources.Slots)
	c.texts(&j.Tags)
}

// text is a string, written as validUTF8 makes it.
func (c *submitCodec) text(p *string) {
	if c.Reading() {
		*p = c.R.Str()
		return
	}
	v := validUTF8(*p)
	c.String(&v)
}

// name is a text that many jobs share.
func (c *submitCodec) name(p *string) {
	if c.Reading() {
		*p = c.R.Name(c.names)
		return
	}
	v := validUTF8(*p)
	c.String(&v)
}

// texts is a list of texts.
func (c *submitCodec) texts(p *[]string) {
	if c.Reading() {
		*p = c.R.Strings()
		return
	}
	c.Append(appendTexts(c.Written(), *p))
}

// nameMap is a map of texts, its keys and values names.
func (c *submitCodec) nameMap(p *map[string]string) {
	if c.Reading() {
		*p = c.R.NameMap(c.names)
		return
	}
	c.Append(appendTextMap(c.Written(), *p))
}

// payload is a Payload, which must be JSON (appendSubmit checks it
// before writing).
func (c *submitCodec) payload(p *json.RawMessage) {
	if c.Reading() {
		*p = readPayload(&c.R)
		return
	}
	c.Bytes((*[]byte)(p))
}
