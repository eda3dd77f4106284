package binenc

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// Minimum encoded sizes of list items, for Count: a string is at least its
// length, a map pair two lengths. A caller's own items add up their fields.
const (
	MinStringLen  = 1
	MinMapPairLen = 2
)

// Reader reads values from a byte slice, from the start on. Its first error
// sticks: later reads return zero values and read nothing, and Err says what
// was wrong where. It never reads past the slice, and allocates no more than
// a small multiple of the bytes it reads: a count is checked against the
// bytes left before anything is made (see Count). Strings and byte slices
// are copied out, except Raw's. (It moves an offset rather than reslicing:
// no pointer is written as it reads.)
type Reader struct {
	b         []byte
	off       int
	err       error
	checkUTF8 bool
}

// NewReader returns a Reader of b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// NewUTF8Reader returns a Reader of b that also fails on a string (Str,
// Strings, StringMap) that is not valid UTF-8.
func NewUTF8Reader(b []byte) Reader { return Reader{b: b, checkUTF8: true} }

// Err returns the first error, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records what was wrong at the current byte, unless an error is
// already recorded, and stops the reader.
func (r *Reader) Fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at byte %d of %d", what, r.off, len(r.b))
	}
	r.off = len(r.b)
}

// Left is the number of bytes not read yet.
func (r *Reader) Left() int { return len(r.b) - r.off }

// End fails the reader if bytes are left, and returns its error.
func (r *Reader) End() error {
	if r.err == nil && r.off != len(r.b) {
		r.Fail("trailing bytes")
	}
	return r.err
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.off == len(r.b) {
		r.Fail("short byte")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// Uvarint reads an unsigned integer.
func (r *Reader) Uvarint() uint64 {
	if r.off < len(r.b) && r.b[r.off] < 0x80 { // the common one-byte case
		r.off++
		return uint64(r.b[r.off-1])
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.Fail("bad uvarint")
		return 0
	}
	r.off += n
	return v
}

// Varint reads a signed integer.
func (r *Reader) Varint() int64 {
	u := r.Uvarint() // zigzag, as binary.Varint
	return int64(u>>1) ^ -int64(u&1)
}

// Int reads a signed integer that must fit an int.
func (r *Reader) Int() int {
	v := r.Varint()
	if int64(int(v)) != v {
		r.Fail("integer out of range")
		return 0
	}
	return int(v)
}

// Count reads a list's length and checks that the bytes left can hold that
// many items of at least min (1 or more) bytes each.
func (r *Reader) Count(min int) int {
	n := r.Uvarint()
	if n > uint64(r.Left()/min) {
		r.Fail("count past the end")
		return 0
	}
	return int(n)
}

// Raw reads a length-prefixed run of bytes, without copying it: the result
// is part of the reader's slice.
func (r *Reader) Raw() []byte { return r.raw(false) }

// Str reads a string.
func (r *Reader) Str() string { return string(r.raw(r.checkUTF8)) }

// raw reads a length-prefixed run of bytes, which must be UTF-8 if text is
// set. (One function for Raw and Str keeps both inlined into their callers.)
func (r *Reader) raw(text bool) []byte {
	n := r.Uvarint()
	if n > uint64(r.Left()) {
		r.Fail("length past the end")
		return nil
	}
	v := r.b[r.off : r.off+int(n)]
	if text && !utf8.Valid(v) {
		r.Fail("string is not UTF-8")
		return nil
	}
	r.off += int(n)
	return v
}

// Bytes reads a copy of a length-prefixed run of bytes; nil when empty.
func (r *Reader) Bytes() []byte {
	v := r.Raw()
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), v...)
}

// Strings reads a list of strings; nil when empty.
func (r *Reader) Strings() []string {
	n := r.Count(MinStringLen)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.Str()
	}
	return out
}

// StringMap reads a map of strings; nil when empty. A key given twice keeps
// its last value.
func (r *Reader) StringMap() map[string]string {
	n := r.Count(MinMapPairLen)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.Str()
		m[k] = r.Str()
	}
	return m
}

// Bool reads a bool; a byte other than 0 or 1 is an error.
func (r *Reader) Bool() bool {
	if r.off == len(r.b) || r.b[r.off] > 1 {
		r.Fail("bad bool")
		return false
	}
	r.off++
	return r.b[r.off-1] == 1
}

// IntPtr reads an *int: nil when not set.
func (r *Reader) IntPtr() *int {
	if !r.Bool() {
		return nil
	}
	v := r.Int()
	if r.err != nil {
		return nil
	}
	return &v
}

// Time reads a time in Unix nanoseconds.
func (r *Reader) Time() int64 {
	if r.Left() < 8 {
		r.Fail("short time")
		return 0
	}
	r.off += 8
	return int64(binary.LittleEndian.Uint64(r.b[r.off-8:]))
}

// Float reads a float64; NaN and infinities are errors.
func (r *Reader) Float() float64 {
	if r.Left() < 8 {
		r.Fail("short float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off:]))
	if !Finite(v) {
		r.Fail("float is not a number")
		return 0
	}
	r.off += 8
	return v
}
