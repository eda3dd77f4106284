package raftnode

import (
	"hash"
	"hash/crc64"
	"testing"
)

// BenchmarkChecksum compares the checksum the snapshot sink records
// (CRC-32C, which the CPU computes) with the CRC-64 hashicorp/raft's sink
// recorded (Go's tables), over 1 MiB writes. Each pass over a snapshot in
// a join goes through one of them: go test -run XXX -bench Checksum
// ./raftnode/
func BenchmarkChecksum(b *testing.B) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for _, c := range []struct {
		name string
		sum  hash.Hash
	}{
		{"crc64-ECMA", crc64.New(crc64.MakeTable(crc64.ECMA))},
		{"crc32-Castagnoli", newCRC32C()},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				c.sum.Write(buf)
			}
		})
	}
}
