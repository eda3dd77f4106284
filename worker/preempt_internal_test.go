package worker

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/workron/workron/api/wire"
)

func TestCheckpointFile(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	w := &Worker{}

	t.Run("PlainJobsGetNone", func(t *testing.T) {
		job, ck := w.withCheckpoint(log, wire.Job{ID: "j", Env: map[string]string{"A": "1"}})
		if ck != nil || job.Env["WORKRON_CHECKPOINT"] != "" {
			t.Fatalf("plain job got checkpoint %+v, env %v", ck, job.Env)
		}
		ck.remove() // safe on nil
	})

	t.Run("GangTaskStartsFromItsCheckpoint", func(t *testing.T) {
		in := wire.Job{ID: "j", GangID: "gang-1", Env: map[string]string{"CHECKPOINT_DATA": base64.StdEncoding.EncodeToString([]byte("step 7"))}}
		job, ck := w.withCheckpoint(log, in)
		defer ck.remove()
		if in.Env["WORKRON_CHECKPOINT"] != "" {
			t.Error("the claimed job's env map was changed in place")
		}
		path := job.Env["WORKRON_CHECKPOINT"]
		if b, err := os.ReadFile(path); err != nil || string(b) != "step 7" {
			t.Fatalf("checkpoint file %s holds %q, %v", path, b, err)
		}
		if err := os.WriteFile(path, []byte("step 9"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := ck.read(log); string(got) != "step 9" {
			t.Errorf("read %q", got)
		}
		ck.remove()
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("checkpoint file left behind: %v", err)
		}
	})

	t.Run("LargeCheckpointsGoThroughTheFileOnly", func(t *testing.T) {
		data := strings.Repeat("x", maxEnvCheckpoint)
		job, ck := w.withCheckpoint(log, wire.Job{ID: "j", GangID: "g", Env: map[string]string{"CHECKPOINT_DATA": base64.StdEncoding.EncodeToString([]byte(data))}})
		defer ck.remove()
		if _, ok := job.Env["CHECKPOINT_DATA"]; ok {
			t.Error("a checkpoint too large for an env var was left in the env")
		}
		if b, _ := os.ReadFile(job.Env["WORKRON_CHECKPOINT"]); string(b) != data {
			t.Error("the large checkpoint did not reach the file")
		}
		if err := os.WriteFile(job.Env["WORKRON_CHECKPOINT"], make([]byte, maxCheckpointBytes+1), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := ck.read(log); got != nil {
			t.Errorf("a checkpoint over the server's cap would be uploaded (%d bytes)", len(got))
		}
	})

	t.Run("ASymlinkOrAFIFOIsNotRead", func(t *testing.T) {
		dir := t.TempDir()
		secret := filepath.Join(dir, "secret")
		if err := os.WriteFile(secret, []byte("the worker's"), 0o600); err != nil {
			t.Fatal(err)
		}
		link, fifo := filepath.Join(dir, "link"), filepath.Join(dir, "fifo")
		if err := os.Symlink(secret, link); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{link, fifo} {
			if got := (&checkpoint{dir: dir, path: path}).read(log); got != nil {
				t.Errorf("read %s = %q, want nothing", path, got)
			}
		}
	})

	t.Run("PreemptionCarriesItsEpoch", func(t *testing.T) {
		err := preemption(7)
		var pe *preemptError
		if !errors.Is(err, errPreempted) || !errors.As(err, &pe) || pe.epoch != 7 || err.Error() != "preempted" {
			t.Fatalf("preemption(7) = %#v", err)
		}
		if preemption(0) != errPreempted {
			t.Error("a preempt action without an epoch is a plain errPreempted")
		}
	})
}
