package raftnode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"os"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// errSnapshotCRC is what a snapshot fails with whose state file does not
// match the checksum in its meta.json (at the file's end), or whose
// meta.json records none (at Open).
var errSnapshotCRC = errors.New("raftnode: snapshot state file does not match its checksum")

// snapshotMeta is a snapshot's meta.json: hashicorp/raft's FileSnapshotStore
// layout (raft.SnapshotMeta and the state file's CRC-64) with one more
// field, the CRC-32C that this store's sink records instead of the CRC-64.
//
// A join went over an 8 GB state file with Go's table-driven CRC-64 three
// times (the leader's reader as it sends, the follower's sink as it
// receives, the follower's reader as it restores) at 1.1-1.7 GB/s a core
// here, where CRC-32C runs on the CPU's CRC32 and carry-less multiply
// instructions at 14-23 GB/s (BenchmarkChecksum). CRC-32C catches every
// error of up to 32 adjacent bits and lets a random corruption through with
// a chance of 2^-32 (CRC-64: 2^-64); a restored state file is checked by
// bbolt's page checks besides (store.QuickCheck at the restore,
// store.VerifyPages in the background, restorecheck.go).
//
// A snapshot names its checksum by the field that holds it: CRC32C in those
// this store writes (CRC is null there), CRC in those hashicorp/raft's sink
// wrote, as every node did before. Open checks whichever is there, CRC32C
// first; a meta.json with neither is refused. A binary from before CRC32C
// reads a null CRC, which no CRC-64 equals, so it refuses such a snapshot
// with its CRC error rather than taking it unchecked
// (TestSnapshotStoreKeepsRaftsLayout; docs/operations.md, "Rolling back").
type snapshotMeta struct {
	raft.SnapshotMeta
	// CRC is the state file's CRC-64 (ECMA), as hashicorp/raft's sink
	// writes it; null in a snapshot this store wrote.
	CRC []byte
	// CRC32C is the state file's CRC-32C (Castagnoli), big-endian as
	// hash/crc32's Sum gives it.
	CRC32C []byte `json:",omitempty"`
}

// checksum returns a hash of the kind m records and the sum it records.
func (m *snapshotMeta) checksum() (hash.Hash, []byte, error) {
	switch {
	case m.CRC32C != nil:
		return newCRC32C(), m.CRC32C, nil
	case m.CRC != nil:
		return crc64.New(crc64.MakeTable(crc64.ECMA)), m.CRC, nil
	}
	return nil, nil, fmt.Errorf("%w: meta.json records none (neither CRC32C nor CRC)", errSnapshotCRC)
}

// newCRC32C is the hash this store's sink records (snapshotMeta.CRC32C).
func newCRC32C() hash.Hash32 { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }

func readSnapshotMeta(path string) (*snapshotMeta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m snapshotMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return &m, nil
}

// writeSnapshotMeta writes m to path as hashicorp/raft's sink does (JSON
// and a newline) and fsyncs it.
func writeSnapshotMeta(path string, m *snapshotMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := copyFile(path, bytes.NewReader(append(b, '\n'))); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// encodePeers is meta.json's Peers as hashicorp/raft's sink fills it (its
// encodePeers, unexported): each voter's address as the transport encodes
// it, the list msgpack-encoded. Raft reads Peers only from version-0
// snapshots; it is kept so that meta.json stays what Raft's sink wrote.
func encodePeers(c raft.Configuration, trans raft.Transport) ([]byte, error) {
	var peers [][]byte
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			peers = append(peers, trans.EncodePeer(s.ID, s.Address))
		}
	}
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, encodeHandle).Encode(peers); err != nil {
		return nil, fmt.Errorf("encode peers: %w", err)
	}
	return buf.Bytes(), nil
}
