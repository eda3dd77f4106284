package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// junkBody is size bytes of a body that is not a backup, made as it is
// read (never held in memory). Every 4 MiB it calls sample.
type junkBody struct {
	size, read, next int64
	sample           func()
}

func (b *junkBody) Read(p []byte) (int, error) {
	if b.read == b.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), b.size-b.read)
	for i := range p[:n] {
		p[i] = byte(b.read + int64(i))
	}
	b.read += n
	if b.sample != nil && b.read >= b.next {
		b.sample()
		b.next += 4 << 20
	}
	return int(n), nil
}

// seeingNode is a loneNode that keeps a hard link to each file a restore
// receives into, so a test can see what was written after the file is
// removed.
type seeingNode struct {
	*loneNode
	seen []string
}

func (n *seeingNode) NewRestoreFile() (*os.File, error) {
	f, err := n.loneNode.NewRestoreFile()
	if err == nil {
		err = os.Link(f.Name(), f.Name()+".seen")
		n.seen = append(n.seen, f.Name()+".seen")
	}
	return f, err
}

// TestRestoreUpload: POST /restore streams its body to a file in the data
// directory, bounded in bytes, in disk and in memory, one restore at a
// time, and the file goes on every path. Before, the route read its body
// whole into memory within --max-body-bytes (1 MiB) and answered 413 to
// anything larger.
func TestRestoreUpload(t *testing.T) {
	var node *seeingNode
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), func(c *Config) {
		node = &seeingNode{loneNode: c.Node.(*loneNode)}
		c.Node, c.MaxRestoreBytes = node, 1<<20
	})
	s := e.srv
	send := func(body io.Reader, length int64) (*httptest.ResponseRecorder, wire.Error) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/restore", body)
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/octet-stream")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		var werr wire.Error
		_ = json.Unmarshal(rec.Body.Bytes(), &werr)
		return rec, werr
	}
	noFilesLeft := func(t *testing.T) {
		t.Helper()
		left, _ := filepath.Glob(filepath.Join(node.restoreDir, "restore-upload-*.db"))
		if len(left) > 0 {
			t.Errorf("files left: %v", left)
		}
		if used := s.budget.used.Load(); used != 0 {
			t.Errorf("%d bytes of the body budget still held", used)
		}
		if s.restoring.Load() {
			t.Error("the restore slot is still held")
		}
	}

	t.Run("A64MiBBodyStreamsToDiskNotMemory", func(t *testing.T) {
		s.cfg.MaxRestoreBytes = 128 << 20
		defer func() { s.cfg.MaxRestoreBytes = 1 << 20 }()
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base, peak := ms.HeapAlloc, ms.HeapAlloc
		var budgetPeak int64
		body := &junkBody{size: 64 << 20}
		body.sample = func() {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			budgetPeak = max(budgetPeak, s.budget.used.Load())
		}
		rec, werr := send(body, body.size)
		if rec.Code != http.StatusBadRequest || werr.Code != wire.CodeBadBackup {
			t.Fatalf("got %d %+v, want 400 bad_backup", rec.Code, werr)
		}
		if body.read != body.size {
			t.Errorf("read %d bytes of the body, want all %d", body.read, body.size)
		}
		if grew := int64(peak - base); grew > 16<<20 {
			t.Errorf("the heap grew by %d bytes while receiving a %d-byte body, want under 16 MiB", grew, body.size)
		}
		if budgetPeak > restoreBuffer {
			t.Errorf("the restore held %d bytes of the body budget, want at most its buffer (%d)", budgetPeak, restoreBuffer)
		}
		noFilesLeft(t)
	})

	t.Run("ABodyOverTheLimitIsRefusedHavingWrittenAtMostTheLimit", func(t *testing.T) {
		node.seen = nil
		body := &junkBody{size: 3 << 20}
		rec, werr := send(body, -1) // chunked: counted as it is written
		if rec.Code != http.StatusRequestEntityTooLarge || werr.Code != wire.CodeTooLarge {
			t.Fatalf("got %d %+v, want 413 too_large", rec.Code, werr)
		}
		if len(node.seen) != 1 {
			t.Fatalf("%d files received into, want 1", len(node.seen))
		}
		fi, err := os.Stat(node.seen[0])
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > s.cfg.MaxRestoreBytes {
			t.Errorf("wrote %d bytes, more than the limit %d", fi.Size(), s.cfg.MaxRestoreBytes)
		}
		noFilesLeft(t)
	})

	t.Run("ABodyWhoseLengthIsOverTheLimitIsNotRead", func(t *testing.T) {
		node.seen = nil
		body := &junkBody{size: 3 << 20}
		rec, werr := send(body, body.size)
		if rec.Code != http.StatusRequestEntityTooLarge || werr.Code != wire.CodeTooLarge {
			t.Fatalf("got %d %+v, want 413 too_large", rec.Code, werr)
		}
		if body.read != 0 || len(node.seen) != 0 {
			t.Errorf("read %d bytes into %d files, want none", body.read, len(node.seen))
		}
		noFilesLeft(t)
	})

	t.Run("ADiskWithoutRoomRefusesBeforeReading", func(t *testing.T) {
		s.diskFree = func(string) (uint64, bool) { return restoreDiskReserve + 100<<10, true }
		defer func() { s.diskFree = diskFree }()
		for _, length := range []int64{512 << 10, -1} { // this backup does not fit; none can
			if length < 0 {
				s.diskFree = func(string) (uint64, bool) { return restoreDiskReserve - 1, true }
			}
			body := &junkBody{size: 512 << 10}
			rec, werr := send(body, length)
			if rec.Code != http.StatusRequestEntityTooLarge || werr.Code != wire.CodeTooLarge {
				t.Fatalf("length %d: got %d %+v, want 413 too_large", length, rec.Code, werr)
			}
			if body.read != 0 {
				t.Errorf("length %d: read %d bytes, want none", length, body.read)
			}
			t.Log(werr.Error)
		}
		noFilesLeft(t)
	})

	t.Run("AFullBodyBudgetRefusesBeforeReading", func(t *testing.T) {
		room := int64(restoreBuffer - 1)
		s.budget.take(s.budget.max - room)
		body := &junkBody{size: 512 << 10}
		rec, werr := send(body, body.size)
		s.budget.give(s.budget.max - room)
		if rec.Code != http.StatusServiceUnavailable || werr.Code != wire.CodeBusy || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("got %d %+v, want 503 busy with Retry-After", rec.Code, werr)
		}
		if body.read != 0 {
			t.Errorf("read %d bytes, want none", body.read)
		}
		noFilesLeft(t)
	})

	t.Run("ASecondRestoreIsRefusedWhileOneIsReceived", func(t *testing.T) {
		pr, pw := io.Pipe()
		first := make(chan wire.Error, 1)
		var firstCode atomic.Int64
		go func() {
			rec, werr := send(pr, -1)
			firstCode.Store(int64(rec.Code))
			first <- werr
		}()
		if _, err := pw.Write(make([]byte, 4096)); err != nil { // the first is being received
			t.Fatal(err)
		}
		body := &junkBody{size: 512 << 10}
		rec, werr := send(body, body.size)
		if rec.Code != http.StatusConflict || werr.Code != wire.CodeConflict || rec.Header().Get("Retry-After") == "" {
			t.Errorf("got %d %+v, want 409 conflict with Retry-After", rec.Code, werr)
		}
		if body.read != 0 {
			t.Errorf("read %d bytes of the second, want none", body.read)
		}
		pw.Close()
		if werr := <-first; firstCode.Load() != http.StatusBadRequest || werr.Code != wire.CodeBadBackup {
			t.Errorf("the first got %d %+v, want 400 bad_backup", firstCode.Load(), werr)
		}
		noFilesLeft(t)
		// The slot is free again.
		if err := poll.True(t.Context(), 5*time.Second, time.Millisecond, func() bool { return !s.restoring.Load() }); err != nil {
			t.Fatal(err)
		}
		body = &junkBody{size: 512 << 10}
		if rec, werr := send(body, body.size); werr.Code != wire.CodeBadBackup {
			t.Errorf("after the first ended: %d %+v, want 400 bad_backup", rec.Code, werr)
		}
	})

	t.Run("ABrokenBodyIsRefused", func(t *testing.T) {
		rec, werr := send(io.MultiReader(&junkBody{size: 8192}, errReader{}), -1)
		if rec.Code != http.StatusBadRequest || werr.Code != wire.CodeInvalid {
			t.Fatalf("got %d %+v, want 400 invalid", rec.Code, werr)
		}
		noFilesLeft(t)
	})
}

// errReader fails every read, as a client that went away.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
