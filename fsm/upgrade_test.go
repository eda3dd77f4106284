package fsm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
)

// TestUpgradeMessages checks what a node running an older binary says when
// it meets an entry a newer one wrote: it stops (panics, before applying
// anything of the batch) with a message that names the log index and says
// to upgrade, whether the entry has a newer encoding version, an op code
// this version does not know, or a command it does not know (as JSON: op
// code 0 of a binary entry, or a JSON entry). (That nothing of a stopped
// batch sticks, even the good entries before the bad one, is
// TestApplyBatch's UndecodableEntryStopsTheNodeAndItsStoreKeepsTheLastGoodBatch.)
func TestUpgradeMessages(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"NewerEncodingVersion", append([]byte{fsm.EncodingVersion + 1}, `{"now":1,"cmds":[]}`...),
			[]string{"index 2", fmt.Sprintf("encoding version %d is newer", fsm.EncodingVersion+1), "upgrade this node's binary"}},
		{"UnknownCommand", []byte("\x02\x02\x01\x00" + withLen(`{"op":"from_the_future","future":{}}`)),
			[]string{"index 2", `"from_the_future"`, "upgrade this node's binary"}},
		{"UnknownOpCode", []byte{fsm.EncodingVersion, 2, 1, 99, 0, 0},
			[]string{"index 2", "unknown op code 99", "upgrade this node's binary"}},
		{"UnknownCommandInAJSONEntry", append([]byte{1}, `{"now":1,"cmds":[{"op":"from_the_future","future":{}}]}`...),
			[]string{"index 2", `"from_the_future"`, "upgrade this node's binary"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newTestFSM(t)
			applyCmd(t, f, 1, t0, submit(fsm.NewJob{Command: "x"}))
			before := digest(t, f)
			v := mustPanic(t, func() {
				f.ApplyBatch([]*raft.Log{{Index: 2, Type: raft.LogCommand, Data: c.data}})
			})
			msg := fmt.Sprint(v)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("panic %q does not say %q", msg, w)
				}
			}
			if digest(t, f) != before {
				t.Error("the stopped batch changed the stored state")
			}
		})
	}
}
