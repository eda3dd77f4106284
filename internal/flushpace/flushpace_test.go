package flushpace

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The pacer flushes once per step written, whatever the sizes of the
// writes, and the file reads back as written.
func TestPacerFlushesEveryStep(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := New(f, 1000)
	want := bytes.Repeat([]byte("0123456789"), 660)
	// Writes of 600 bytes: a step is complete after the 2nd (1,200),
	// 4th (2,400 - 1,200 = 1,200), ... write.
	for i := range 11 {
		chunk := want[i*600 : (i+1)*600]
		n, err := f.Write(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wrote(n); err != nil {
			t.Fatal(err)
		}
		if got, wantFlushes := p.Flushes(), (i+1)/2; got != wantFlushes {
			t.Fatalf("after write %d: %d flushes, want %d", i+1, got, wantFlushes)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes, not the %d written", len(got), len(want))
	}
}

// A flush of a file that cannot be flushed is an error, not silence.
func TestPacerReportsAFailedFlush(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	p := New(f, 10)
	f.Close()
	if err := p.Wrote(10); err == nil {
		t.Fatal("Wrote flushed a closed file without an error")
	}
}
