package raftnode

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// bufSink is a snapshot sink into memory.
type bufSink struct {
	raft.SnapshotSink
	buf    bytes.Buffer
	writes []int
}

func (b *bufSink) Write(p []byte) (int, error) {
	b.writes = append(b.writes, len(p))
	return b.buf.Write(p)
}

// The paced sink hands the sink every byte in order, in chunks no larger
// than paceChunk, waits as its limiter says once the burst is spent, and
// stops waiting once the node shuts down.
func TestPacedSink(t *testing.T) {
	const rate = 1 << 20 // 1 MiB/s: 4 chunks a second
	data := bytes.Repeat([]byte("0123456789abcdef"), (3*paceChunk+100)/16+1)
	inner := &bufSink{}
	stop := make(chan struct{})
	p := newPacedSink(inner, rate, stop)
	// A clock that stands still: each delay is then the time from the
	// start until its chunk may go, and the last one the whole write's.
	t0 := time.Now()
	p.now = func() time.Time { return t0 }
	var waited time.Duration
	p.sleep = func(d time.Duration, _ <-chan struct{}) { waited = max(waited, d) }

	n, err := p.Write(data)
	if err != nil || n != len(data) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(data))
	}
	if !bytes.Equal(inner.buf.Bytes(), data) {
		t.Fatal("the sink got other bytes than were written")
	}
	for _, w := range inner.writes {
		if w > paceChunk {
			t.Fatalf("a write of %d bytes reached the sink; at most %d", w, paceChunk)
		}
	}
	// The first chunk is the burst; the rest wait for their bytes at 1 MiB/s.
	want := time.Duration(float64(len(data)-paceChunk) / rate * float64(time.Second))
	if waited < want*98/100 || waited > want*102/100 { // the limiter rounds its tokens
		t.Fatalf("waited %s for %d bytes at %d B/s, want about %s", waited, len(data), rate, want)
	}

	close(stop)
	waited = 0
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	if waited != 0 {
		t.Fatalf("waited %s after shutdown began, want none", waited)
	}
}
