//go:build unix

package hostile

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostileShort runs every attack at its short size against a real
// three-node cluster with tokens, as CI does: each hostile request is
// refused (or served within its bounds), no node passes 1 GiB, every
// canary job accepted meanwhile finishes. Terms and /health latency are
// logged, not checked: they depend on how busy the machine is (the long
// mode, scripts/hostile, checks them).
func TestHostileShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and floods it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "workron")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/workron/workron/cmd/workron").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var log strings.Builder
	rep, err := Run(ctx, Config{Bin: bin, Dir: filepath.Join(dir, "run"), Short: true, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var table strings.Builder
	PrintTable(&table, rep)
	t.Logf("\n%s", table.String())
	if len(rep.Results) != len(attacks) {
		t.Errorf("ran %d attacks, want %d", len(rep.Results), len(attacks))
	}
	if rep.CanariesAccepted == 0 {
		t.Error("no canary job was accepted during the attacks: the other tenant was starved")
	}
	if rep.Failed() {
		t.Errorf("checks failed (see the table above)\n%s", log.String())
	}
}

// TestUnknownAttack: a name not in the suite is refused before anything
// starts.
func TestUnknownAttack(t *testing.T) {
	_, err := Run(context.Background(), Config{Bin: "x", Dir: t.TempDir(), Attacks: []string{"cascade", "nope"}})
	if err == nil || !strings.Contains(err.Error(), `unknown attack "nope"`) {
		t.Fatalf("err = %v, want the unknown attack named", err)
	}
}
