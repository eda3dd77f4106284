package gctune

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, minGrowth uint64
		want            int
	}{
		{0, 128 * mib, 3200},          // no collection yet: the runtime's minimum, scaled to the floor
		{2 * mib, 128 * mib, 3200},    // below that minimum: the same
		{64 * mib, 128 * mib, 200},    // grows by 128 MiB
		{60 * mib, 128 * mib, 214},    // rounded up: at least the floor
		{128 * mib, 128 * mib, 100},   // Go's own rule already grows it enough
		{1024 * mib, 128 * mib, 100},  // and more above it
		{64 * mib, 0, 100},            // no floor
		{8 * mib, 1 * mib, 100},       // a floor below the runtime's minimum changes nothing
		{4 * mib, 4096 * mib, 102400}, // a large floor over a small heap
	} {
		if got := Percent(c.live, c.minGrowth); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.minGrowth/mib, got, c.want)
		}
	}
}

// The tuner sets the percent after each collection, arms itself again, and
// sets nothing when the percent would not change.
func TestTunerFollowsEachCollection(t *testing.T) {
	lives := make(chan uint64, 1)
	sets := make(chan int, 8)
	var last uint64 = 64 * mib
	tu := &tuner{
		minGrowth: 128 * mib,
		// Never block: the tuner outlives the test, on the runtime's
		// finalizer goroutine, which other finalizers share.
		live: func() uint64 {
			select {
			case l := <-lives:
				last = l
			default:
			}
			return last
		},
		set: func(p int) int {
			select {
			case sets <- p:
			default:
			}
			return 0
		},
	}
	tu.arm()
	for _, c := range []struct {
		idle uint64 // collections over the heap as it was, first
		live uint64
		want int
	}{
		{0, 64 * mib, 200},
		{0, 32 * mib, 400},
		{0, 256 * mib, 100},
		// Collections that find the heap unchanged set nothing: a 100
		// set again for them would arrive before the 200.
		{3, 64 * mib, 200},
	} {
		for range c.idle {
			runtime.GC()
		}
		lives <- c.live
		if got := collectUntil(t, sets); got != c.want {
			t.Fatalf("after a collection with %d MiB live: set %d, want %d", c.live/mib, got, c.want)
		}
	}
}

// collectUntil runs collections until the tuner reports a new percent;
// finalizers run on their own goroutine, after the collection.
func collectUntil(t *testing.T, sets <-chan int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		select {
		case p := <-sets:
			return p
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the tuner did not run after 30 s of collections")
	return 0
}

// Start, in a process of its own: it retargets the collector unless GOGC
// is in the environment.
func TestStart(t *testing.T) {
	if os.Getenv("GCTUNE_CHILD") != "" {
		Start(256 * mib)
		runtime.GC()
		runtime.GC()
		time.Sleep(100 * time.Millisecond) // the finalizer; the parent tolerates either percent it sets
		fmt.Printf("percent=%d\n", debug.SetGCPercent(100))
		return
	}
	for _, c := range []struct {
		env  string
		want func(int) bool
		what string
	}{
		{"", func(p int) bool { return p > 100 }, "above Go's 100 for a small heap"},
		{"GOGC=150", func(p int) bool { return p == 150 }, "GOGC's 150"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStart$")
		cmd.Env = append(os.Environ(), "GCTUNE_CHILD=1")
		cmd.Env = slicesWithout(cmd.Env, "GOGC=")
		if c.env != "" {
			cmd.Env = append(cmd.Env, c.env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child (%q): %v\n%s", c.env, err, out)
		}
		_, after, ok := strings.Cut(string(out), "percent=")
		if !ok {
			t.Fatalf("child (%q) printed no percent:\n%s", c.env, out)
		}
		p, err := strconv.Atoi(strings.Fields(after)[0])
		if err != nil || !c.want(p) {
			t.Fatalf("child (%q): percent %q, want %s", c.env, after, c.what)
		}
	}
}

func slicesWithout(env []string, prefix string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}
