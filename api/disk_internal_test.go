package api

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/raftnode"
)

// DiskUsage of a loneNode: its restore directory stands for the data
// directory, and its FSM's store for the state file.
func (n *loneNode) DiskUsage() raftnode.DiskUsage {
	u := raftnode.DiskUsage{DataDir: n.restoreDir}
	if sz, err := n.FSM.StoreSize(); err == nil {
		u.StateBytes, u.StateInUseBytes = sz.FileBytes, sz.InUseBytes
	}
	return u
}

// lockedBuffer is a log sink safe for the handler's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func TestDiskLow(t *testing.T) {
	const gib = 1 << 30
	setup := func(t *testing.T) (*schedEnv, *lockedBuffer, *[2]uint64) {
		logs := &lockedBuffer{}
		env := newSchedEnv(t, time.Unix(1_700_000_000, 0), func(c *Config) {
			c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		})
		disk := &[2]uint64{50 * gib, 100 * gib} // free, size
		env.srv.diskSpace = func(string) (uint64, uint64, bool) { return disk[0], disk[1], true }
		return env, logs, disk
	}
	health := func(t *testing.T, env *schedEnv) (int, wire.Health) {
		t.Helper()
		var h wire.Health
		code, _ := env.do("GET", "/health", nil, &h)
		if h.Disk == nil {
			t.Fatal("GET /health without its disk")
		}
		return code, h
	}

	t.Run("WarnsOncePerCrossingAndStaysHealthy", func(t *testing.T) {
		env, logs, disk := setup(t)
		env.srv.checkDisk()
		if _, h := health(t, env); h.Disk.Low || h.Disk.FreeBytes != 50*gib || h.Disk.LowBelowBytes != 10*gib {
			t.Fatalf("disk %+v, want 50 GiB free, low below 10 GiB, not low", h.Disk)
		}
		disk[0] = 5 * gib // under 10%
		for range 3 {
			env.srv.checkDisk()
		}
		if n := logs.count("disk space low"); n != 1 {
			t.Fatalf("%d warnings for one crossing, want 1:\n%s", n, logs.b.String())
		}
		code, h := health(t, env)
		if code != http.StatusOK || h.Status != wire.HealthOK || !h.Disk.Low {
			t.Fatalf("GET /health = %d %q, disk %+v; want 200 ok with disk.low", code, h.Status, h.Disk)
		}
		if h.Disk.StateBytes == 0 || h.Disk.StateInUseBytes == 0 {
			t.Fatalf("disk %+v without the state file's size", h.Disk)
		}
		if code, _ := env.do("GET", "/jobs", nil, nil); code != http.StatusOK {
			t.Fatalf("GET /jobs on a node whose disk is low = %d, want 200", code)
		}
		if got := scrape(t, env); !strings.Contains(got, "workron_disk_low 1\n") || !strings.Contains(got, "workron_store_bytes ") {
			t.Fatalf("metrics lack workron_disk_low 1 or workron_store_bytes:\n%s", grepLines(got, "workron_"))
		}
		disk[0] = 40 * gib
		env.srv.checkDisk()
		env.srv.checkDisk()
		if n := logs.count("disk space no longer low"); n != 1 {
			t.Fatalf("%d recoveries logged, want 1", n)
		}
		if got := scrape(t, env); !strings.Contains(got, "workron_disk_low 0\n") {
			t.Fatalf("workron_disk_low not back to 0:\n%s", grepLines(got, "workron_disk"))
		}
	})

	t.Run("ASmallDiskWarnsUnderTheBytes", func(t *testing.T) {
		env, _, disk := setup(t)
		disk[0], disk[1] = 900<<20, 4*gib // 22% free, under 1 GiB
		if r := env.srv.checkDisk(); !r.low || r.lowBelow != gib {
			t.Fatalf("900 MiB free of 4 GiB: low %v below %d, want low below 1 GiB", r.low, r.lowBelow)
		}
	})

	t.Run("ZeroNeverWarns", func(t *testing.T) {
		env, _, disk := setup(t)
		env.srv.cfg.DiskLowFree = DiskThreshold{}
		disk[0] = 0
		if r := env.srv.checkDisk(); r.low {
			t.Fatal("a zero threshold warned")
		}
	})

	t.Run("UnknownSpaceIsNeverLow", func(t *testing.T) {
		env, _, _ := setup(t)
		env.srv.diskSpace = func(string) (uint64, uint64, bool) { return 0, 0, false }
		if _, h := health(t, env); h.Disk.Low || h.Disk.SizeBytes != 0 {
			t.Fatalf("disk %+v on a system that does not tell", h.Disk)
		}
	})
}

func scrape(t *testing.T, env *schedEnv) string {
	t.Helper()
	rec := httptest.NewRecorder()
	env.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestParseDiskThreshold(t *testing.T) {
	for _, c := range []struct {
		in   string
		want DiskThreshold
		ok   bool
	}{
		{"10%,1GiB", DiskThreshold{Percent: 10, Bytes: 1 << 30}, true},
		{"5%", DiskThreshold{Percent: 5}, true},
		{"500MB", DiskThreshold{Bytes: 500e6}, true},
		{"2048", DiskThreshold{Bytes: 2048}, true},
		{"0", DiskThreshold{}, true},
		{"101%", DiskThreshold{}, false},
		{"-1GiB", DiskThreshold{}, false},
		{"lots", DiskThreshold{}, false},
	} {
		got, err := ParseDiskThreshold(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDiskThreshold(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	if got, err := ParseDiskThreshold(DefaultDiskThreshold.String()); err != nil || got != DefaultDiskThreshold {
		t.Errorf("the default does not read back: %q gives %+v, %v", DefaultDiskThreshold.String(), got, err)
	}
}
