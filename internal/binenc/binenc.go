// Package binenc holds the primitives of Workron's hand-written binary
// encodings: functions that append integers, times, floats, bools, strings,
// lists and maps to a byte slice, a Reader that reads them back with
// bounds checks and a sticky error, and a Codec that does either through
// one call per field, so that a caller's layout is one walk over its fields
// for both directions. It owns how each value is written, never a layout: which fields come in what order, and the version byte that names
// that order, belong to the caller (store's job records, fsm's log entries).
//
// The encodings, all of them deterministic:
//
//   - an unsigned integer is a uvarint, a signed one a varint
//     (binary.AppendUvarint, AppendVarint);
//   - a time (Unix nanoseconds) is 8 bytes little-endian;
//   - a float64 is its IEEE 754 bits, 8 bytes little-endian, with -0 written
//     as 0; NaN and infinities are the caller's to refuse, and Reader.Float
//     refuses them;
//   - a bool is one byte, 0 or 1;
//   - a string or byte slice is its length as a uvarint, then its bytes;
//   - a list is a uvarint count, then its items;
//   - a map is a count, then key, value pairs in key order;
//   - an *int is a bool (set), then if set a varint.
package binenc

import (
	"encoding/binary"
	"math"
	"slices"
)

// AppendUvarint appends v as a uvarint.
func AppendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// AppendVarint appends v as a varint.
func AppendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// AppendInt appends v as a varint.
func AppendInt(b []byte, v int) []byte { return binary.AppendVarint(b, int64(v)) }

// AppendTime appends a time in Unix nanoseconds, 8 bytes little-endian.
func AppendTime(b []byte, t int64) []byte {
	return binary.LittleEndian.AppendUint64(b, uint64(t))
}

// AppendFloat appends f's IEEE 754 bits, 8 bytes little-endian; -0 is
// written as 0 (as JSON's omitempty dropped it). The caller refuses NaN and
// infinities, which Reader.Float does not read.
func AppendFloat(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f+0))
}

// Finite reports whether f is neither NaN nor an infinity, so that
// AppendFloat writes what Reader.Float reads.
func Finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// AppendBool appends v as one byte, 0 or 1.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendString appends s's length as a uvarint, then s.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendBytes appends p's length as a uvarint, then p; nil and empty are
// the same.
func AppendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// AppendStrings appends a count, then each string.
func AppendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = AppendString(b, s)
	}
	return b
}

// AppendMap appends a count, then each key and its value, in key order, so
// that a map always gives the same bytes.
func AppendMap(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	if len(m) == 0 {
		return b
	}
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = AppendString(b, k)
		b = AppendString(b, m[k])
	}
	return b
}

// AppendIntPtr appends whether p is set, then if it is, *p as a varint.
func AppendIntPtr(b []byte, p *int) []byte {
	if p == nil {
		return AppendBool(b, false)
	}
	return binary.AppendVarint(AppendBool(b, true), int64(*p))
}
