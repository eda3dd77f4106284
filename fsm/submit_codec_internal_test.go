package fsm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/workron/workron/internal/binenc"
	"github.com/workron/workron/store"
)

// TestSubmitCodecIsTheWalk checks that the writer and reader walkgen
// generated (submit_gen.go) write and read what submitCodec's walk itself
// does: the generated codec is the walk's.
func TestSubmitCodecIsTheWalk(t *testing.T) {
	full := NewJob{
		ID: "a\xffb", Command: "cmd", Type: "t", Payload: json.RawMessage(`{"k":1}`),
		Env: map[string]string{"B": "2", "A": "1", "\xfe": "x"}, Metadata: map[string]string{"m": "v"},
		Queue: "q", Priority: -3, DependsOn: []string{"$1", "x\xff"}, MaxAttempts: 4, IdempotencyKey: "idem",
		Timeout: 7, Backoff: store.Backoff{Base: 1, Max: 2, Jitter: 0.5}, RunAt: -9, Retention: 10, UniqueFor: 11,
		Schedule: "s", ScheduledFor: 12, Resources: store.Resources{VRAMMB: 1, MemoryMB: 2, CPUMillis: 3, Slots: 4},
		Tags: []string{"gpu"}, ConcurrencyKey: "k\xff", TraceParent: "tp",
	}
	s := &Submit{Jobs: []NewJob{full, {}, {Command: "x"}}}
	for _, mode := range []struct{ keyed, traced bool }{{false, false}, {true, false}, {true, true}} {
		w := submitWriter{}
		got := w.jobs([]byte{9}, s, mode.keyed, mode.traced)
		c := submitCodec{Codec: binenc.Writing([]byte{9})}
		c.jobs(s, mode.keyed, mode.traced)
		if want := c.Written(); !bytes.Equal(got, want) {
			t.Errorf("keyed %v, traced %v: the writer wrote\n%x\nthe walk writes\n%x\n(go generate ./fsm?)", mode.keyed, mode.traced, got, want)
		}
		r := submitReader{FieldReader: binenc.FieldReader{R: binenc.NewUTF8Reader(got[1:])}, names: binenc.Interner{}}
		read := new(Submit)
		r.jobs(read, mode.keyed, mode.traced)
		wr := submitCodec{Codec: binenc.Reading(binenc.NewUTF8Reader(got[1:])), names: binenc.Interner{}}
		walked := new(Submit)
		wr.jobs(walked, mode.keyed, mode.traced)
		if r.R.End() != nil || wr.R.End() != nil || !reflect.DeepEqual(read, walked) {
			t.Errorf("keyed %v, traced %v: the reader read %+v, %v\nthe walk reads %+v, %v", mode.keyed, mode.traced, read, r.R.End(), walked, wr.R.End())
		}
	}
}
