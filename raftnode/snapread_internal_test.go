package raftnode

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// writeSnapshot writes data as a snapshot at index into s and returns its
// id.
func writeSnapshot(t *testing.T, s raft.SnapshotStore, index uint64, data []byte) string {
	t.Helper()
	_, trans := raft.NewInmemTransport(raft.NewInmemAddr())
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 0, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

// editMeta rewrites snapshot id's meta.json through fn.
func editMeta(t *testing.T, snaps *snapshotStore, id string, fn func(*snapshotMeta)) {
	t.Helper()
	path := filepath.Join(snaps.dir, id, "meta.json")
	m, err := readSnapshotMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	fn(m)
	if err := writeSnapshotMeta(path, m); err != nil {
		t.Fatal(err)
	}
}

// readAfterOpen opens snapshot id and reads it whole, failing the test if
// Open fails.
func readAfterOpen(t *testing.T, snaps *snapshotStore, id string) ([]byte, error) {
	t.Helper()
	_, rc, err := snaps.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// statePath is the state file of snapshot id in snaps.
func statePath(snaps *snapshotStore, id string) string {
	return filepath.Join(snaps.dir, id, "state.bin")
}

// The snapshot reader gives a snapshot's bytes once, and never all of
// them unless the whole state file matched its checksum: a reader that
// stops at the error (Raft's transport, the store's restore) cannot take a
// damaged or cut-off file for a whole one. Each case runs on a snapshot
// this store's sink wrote (CRC-32C) and on one hashicorp/raft's sink wrote
// (CRC-64, as every node did before).
func TestSnapshotReaderChecksTheChecksum(t *testing.T) {
	for _, sum := range []string{"CRC32C", "CRC64"} {
		t.Run(sum, func(t *testing.T) { testSnapshotReaderChecks(t, sum) })
	}
}

func testSnapshotReaderChecks(t *testing.T, sum string) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // 1.6 MB: more than one read
	setup := func(t *testing.T, data []byte) (*snapshotStore, string, string) {
		t.Helper()
		dir := t.TempDir()
		snaps, err := newSnapshotStore(dir, 2, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		var writer raft.SnapshotStore = snaps
		if sum == "CRC64" {
			if writer, err = raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger()); err != nil {
				t.Fatal(err)
			}
		}
		id := writeSnapshot(t, writer, 5, data)
		m, err := readSnapshotMeta(filepath.Join(snaps.dir, id, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		got := "CRC64"
		if m.CRC32C != nil {
			got = "CRC32C"
		}
		if got != sum || (m.CRC != nil) == (m.CRC32C != nil) {
			t.Fatalf("meta.json has CRC %x and CRC32C %x; want only the %s", m.CRC, m.CRC32C, sum)
		}
		return snaps, id, statePath(snaps, id)
	}
	damage := func(t *testing.T, path string, fn func([]byte) []byte) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, fn(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("AWholeFileReadsBack", func(t *testing.T) {
		snaps, id, _ := setup(t, data)
		if got := readSnapshot(t, snaps, id); !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, want the %d written", len(got), len(data))
		}
	})
	t.Run("AFlippedByteFailsBeforeTheLastBytes", func(t *testing.T) {
		for _, at := range []int{0, len(data) / 2, len(data) - 1} {
			snaps, id, path := setup(t, data)
			damage(t, path, func(b []byte) []byte { b[at] ^= 1; return b })
			got, err := readAfterOpen(t, snaps, id)
			if !errors.Is(err, errSnapshotCRC) {
				t.Fatalf("byte %d flipped: read err = %v, want errSnapshotCRC", at, err)
			}
			if len(got) >= len(data) {
				t.Fatalf("byte %d flipped: the reader gave all %d bytes before failing", at, len(got))
			}
		}
	})
	t.Run("AFileOfAnotherSizeIsRefusedAtOpen", func(t *testing.T) {
		for _, cut := range []func([]byte) []byte{
			func(b []byte) []byte { return b[:len(b)-1] },
			func(b []byte) []byte { return append(b, 0) },
		} {
			snaps, id, path := setup(t, data)
			damage(t, path, cut)
			if _, rc, err := snaps.Open(id); err == nil {
				rc.Close()
				t.Fatal("opened a snapshot whose state file is not the size its meta says")
			}
		}
	})
	t.Run("AFileCutAfterOpenFails", func(t *testing.T) {
		snaps, id, path := setup(t, data)
		_, rc, err := snaps.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if err := os.Truncate(path, int64(len(data)/2)); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		if !errors.Is(err, errSnapshotCRC) || len(got) >= len(data) {
			t.Fatalf("read %d bytes of a file of %d cut to %d, err = %v; want errSnapshotCRC before the end", len(got), len(data), len(data)/2, err)
		}
	})
	t.Run("AChecksumThatDiffersFailsAtTheEnd", func(t *testing.T) {
		snaps, id, _ := setup(t, data)
		editMeta(t, snaps, id, func(m *snapshotMeta) {
			for _, b := range [][]byte{m.CRC, m.CRC32C} {
				if b != nil {
					b[len(b)-1] ^= 1
				}
			}
		})
		if got, err := readAfterOpen(t, snaps, id); !errors.Is(err, errSnapshotCRC) || len(got) >= len(data) {
			t.Fatalf("read %d bytes of %d, err = %v; want errSnapshotCRC before the end", len(got), len(data), err)
		}
	})
	t.Run("AnEmptySnapshotIsChecked", func(t *testing.T) {
		snaps, id, _ := setup(t, nil)
		if got := readSnapshot(t, snaps, id); len(got) != 0 {
			t.Fatalf("read %d bytes of an empty snapshot", len(got))
		}
		editMeta(t, snaps, id, func(m *snapshotMeta) { m.CRC, m.CRC32C = []byte{1}, nil })
		if _, err := readAfterOpen(t, snaps, id); !errors.Is(err, errSnapshotCRC) {
			t.Fatalf("empty snapshot whose meta.json has another checksum: err = %v, want errSnapshotCRC", err)
		}
	})
}

// A meta.json that records no checksum, neither a CRC-32C nor a CRC-64, is
// refused at Open: its state file cannot be checked.
func TestSnapshotWithoutAChecksumIsRefused(t *testing.T) {
	snaps, err := newSnapshotStore(t.TempDir(), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	id := writeSnapshot(t, snaps, 5, []byte("state"))
	editMeta(t, snaps, id, func(m *snapshotMeta) { m.CRC, m.CRC32C = nil, nil })
	if _, rc, err := snaps.Open(id); !errors.Is(err, errSnapshotCRC) {
		if err == nil {
			rc.Close()
		}
		t.Fatalf("Open of a snapshot without a checksum: err = %v, want errSnapshotCRC", err)
	}
}

// A snapshot whose state file was damaged after it was written is refused
// by the restore Raft runs (fsm.FSM.RestoreChecked), which checks only the pages
// opening the file reads: the CRC is what refuses it, and the state stays.
func TestRestoreOfADamagedSnapshotKeepsTheState(t *testing.T) {
	src, err := store.Open(filepath.Join(t.TempDir(), "src.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Update(func(tx *store.Tx) error { return tx.SetApplied(50) }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sn, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, err = sn.WriteTo(&buf)
	sn.Close()
	if err != nil {
		t.Fatal(err)
	}

	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Update(func(tx *store.Tx) error { return tx.SetApplied(7) }); err != nil {
		t.Fatal(err)
	}
	f, err := fsm.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := newSnapshotStore(t.TempDir(), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	restore := func(id string) error {
		_, rc, err := snaps.Open(id)
		if err != nil {
			return err
		}
		return f.RestoreChecked(rc)
	}

	// A byte of the last page, one that opening the file does not read.
	id := writeSnapshot(t, snaps, 50, buf.Bytes())
	path := statePath(snaps, id)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-100] ^= 0xFF
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := restore(id); !errors.Is(err, errSnapshotCRC) {
		t.Fatalf("restore of a damaged snapshot: err = %v, want errSnapshotCRC", err)
	}
	if got := f.Applied(); got != 7 {
		t.Fatalf("applied index after a refused restore = %d, want the old state's 7", got)
	}

	id = writeSnapshot(t, snaps, 60, buf.Bytes())
	if err := restore(id); err != nil {
		t.Fatalf("restore of a whole snapshot: %v", err)
	}
	if got := f.Applied(); got != 50 {
		t.Fatalf("applied index after the restore = %d, want the snapshot's 50", got)
	}
}
