package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// steppedDown is a loneNode that has handed leadership to n2.
type steppedDown struct{ *loneNode }

func (steppedDown) IsLeader() bool           { return false }
func (steppedDown) Leader() (string, string) { return "n2", "127.0.0.1:2" }
func (steppedDown) Role() string             { return "follower" }

// TestRemoveAtLeader checks how a leader that handed leadership over asks
// the new leader to remove it: it retries while the answer says nothing was
// done, passes on any other answer, and takes a 404 after an attempt whose
// answer was lost as the removal that attempt made.
func TestRemoveAtLeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []int  // the new leader's answers in turn; 0 drops the connection
		want    int    // 0: an error
		leader  string // the reply's leader, if want is 200
	}{
		{"AnAnswerLostEveryTimeIsAnUnknownOutcome", []int{0}, 0, ""},
		{"RetriedWhileTheNewLeaderIsNotReady", []int{503, 503, 200}, 200, "n2"},
		{"ANotFoundAfterALostAnswerIsTheRemoval", []int{0, 404}, 200, "n2"},
		{"ANotFoundOtherwiseIsPassedOn", []int{404}, 404, ""},
		{"AConflictIsPassedOn", []int{409}, 409, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodDelete || r.URL.Path != "/cluster/nodes/n1" {
					t.Errorf("the new leader got %s %s", r.Method, r.URL.Path)
				}
				i := int(calls.Add(1)) - 1
				switch status := tc.answers[min(i, len(tc.answers)-1)]; status {
				case 0:
					conn, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						conn.Close()
					}
				case 200:
					writeJSON(w, status, wire.Removal{Removed: "n1", Leader: "n2", Message: "n2 removed n1 from the cluster"})
				default:
					writeJSON(w, status, wire.Error{Error: "refused", Code: "x"})
				}
			}))
			defer leader.Close()
			e := newSchedEnv(t, time.Now(), func(c *Config) { c.Node = steppedDown{c.Node.(*loneNode)} })
			if _, err := e.node.Propose(context.Background(), fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: "n2", HTTP: leader.URL, Raft: "127.0.0.1:2"}}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.want == 0 {
				ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
			}
			status, body, err := e.srv.removeAtLeader(ctx, "n1")
			if tc.want == 0 {
				if !errors.Is(err, raftnode.ErrUnknownOutcome) {
					t.Fatalf("status %d, err %v; want an unknown outcome", status, err)
				}
				return
			}
			if err != nil || status != tc.want {
				t.Fatalf("status %d, err %v, body %s; want %d", status, err, body, tc.want)
			}
			if tc.want == http.StatusOK {
				var rm wire.Removal
				if err := json.Unmarshal(body, &rm); err != nil || rm.Removed != "n1" || rm.Leader != tc.leader {
					t.Fatalf("reply %s (%v)", body, err)
				}
			}
			if int(calls.Load()) != len(tc.answers) {
				t.Errorf("the new leader was asked %d times, want %d", calls.Load(), len(tc.answers))
			}
		})
	}
}
