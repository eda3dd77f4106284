package flushpace

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCopy copies the file WORKRON_FLUSHPACE_SRC (skipped unless set)
// as a snapshot is received or restored, flushed three ways: paced (this
// package), fsync'd every step (as before it), and written whole then
// fsync'd once (the flush the pacing exists to avoid, for its speed only).
// The copy goes to WORKRON_FLUSHPACE_DIR (a temporary directory unless set),
// and beside it a probe writes 4 KiB and fsyncs another file there
// every 2 ms, as the Raft log does: probe-max-ms is its longest wait, the
// stall the pacing exists to bound.
func BenchmarkCopy(b *testing.B) {
	src := os.Getenv("WORKRON_FLUSHPACE_SRC")
	if src == "" {
		b.Skip("WORKRON_FLUSHPACE_SRC names no file")
	}
	dir := os.Getenv("WORKRON_FLUSHPACE_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	const step = 4 << 20
	for _, c := range []struct {
		name  string
		after func(f *os.File, p *Pacer, n int) error
	}{
		{"paced", func(_ *os.File, p *Pacer, n int) error { return p.Wrote(n) }},
		{"fsync-every-step", func(f *os.File, p *Pacer, n int) error {
			if p.written += int64(n); p.written-p.started >= step {
				p.started = p.written
				return f.Sync()
			}
			return nil
		}},
		{"fsync-once", func(*os.File, *Pacer, int) error { return nil }},
	} {
		b.Run(c.name, func(b *testing.B) {
			stop, longest := probe(b, dir)
			defer func() { close(stop); b.ReportMetric(float64((<-longest).Microseconds())/1000, "probe-max-ms") }()
			for b.Loop() {
				in, err := os.Open(src)
				if err != nil {
					b.Fatal(err)
				}
				out, err := os.Create(filepath.Join(dir, "flushpace-copy"))
				if err != nil {
					b.Fatal(err)
				}
				p := New(out, step)
				buf := make([]byte, 1<<20)
				for {
					n, rerr := in.Read(buf)
					if n > 0 {
						if _, err := out.Write(buf[:n]); err != nil {
							b.Fatal(err)
						}
						if err := c.after(out, p, n); err != nil {
							b.Fatal(err)
						}
					}
					if rerr == io.EOF {
						break
					} else if rerr != nil {
						b.Fatal(rerr)
					}
				}
				if err := out.Sync(); err != nil {
					b.Fatal(err)
				}
				in.Close()
				out.Close()
				os.Remove(out.Name())
			}
		})
	}
}

// probe writes 4 KiB at the start of a file in dir and fsyncs it every
// 2 ms until stop closes, then sends its longest wait.
func probe(b *testing.B, dir string) (chan struct{}, chan time.Duration) {
	f, err := os.Create(filepath.Join(dir, "flushpace-probe"))
	if err != nil {
		b.Fatal(err)
	}
	stop, longest := make(chan struct{}), make(chan time.Duration, 1)
	go func() {
		defer os.Remove(f.Name())
		defer f.Close()
		var worst time.Duration
		page := make([]byte, 4096)
		for {
			select {
			case <-stop:
				longest <- worst
				return
			case <-time.After(2 * time.Millisecond):
			}
			t := time.Now()
			if _, err := f.WriteAt(page, 0); err == nil {
				_ = f.Sync()
			}
			worst = max(worst, time.Since(t))
		}
	}()
	return stop, longest
}
