package binenc

import (
	"bytes"
	"reflect"
	"testing"
)

// codecValues is one variable of each kind Codec writes.
type codecValues struct {
	s   string
	p   []byte
	u   uint64
	v   int64
	i   int
	t   int64
	f   float64
	b   bool
	ip  *int
	ss  []string
	m   map[string]string
	cnt int
}

func (x *codecValues) walk(c *Codec) {
	c.String(&x.s)
	c.Bytes(&x.p)
	c.Uvarint(&x.u)
	c.Varint(&x.v)
	c.Int(&x.i)
	c.Time(&x.t)
	c.Float(&x.f)
	c.Bool(&x.b)
	c.IntPtr(&x.ip)
	c.Count(&x.cnt, 1)
	c.Strings(&x.ss)
	c.Map(&x.m)
}

// TestCodec checks that a writing Codec writes what the Append functions
// do, from any starting buffer, and that a reading one reads it back.
func TestCodec(t *testing.T) {
	seven := -7
	x := codecValues{s: "é", p: []byte("pay"), u: 1 << 63, v: -1 << 40, i: 300, t: -5, f: 0.25, b: true, ip: &seven,
		ss: []string{"a", ""}, m: map[string]string{"b": "2", "a": "1"}, cnt: 2}
	var want []byte
	want = AppendString(want, x.s)
	want = AppendBytes(want, x.p)
	want = AppendUvarint(want, x.u)
	want = AppendVarint(want, x.v)
	want = AppendInt(want, x.i)
	want = AppendTime(want, x.t)
	want = AppendFloat(want, x.f)
	want = AppendBool(want, x.b)
	want = AppendIntPtr(want, x.ip)
	want = AppendUvarint(want, uint64(x.cnt))
	want = AppendStrings(want, x.ss)
	want = AppendMap(want, x.m)
	for _, start := range [][]byte{nil, []byte("hd"), make([]byte, 1, 1000)} {
		c := Writing(start)
		x.walk(&c)
		got := c.Written()
		if !bytes.Equal(got[:len(start)], start) || !bytes.Equal(got[len(start):], want) {
			t.Fatalf("from %q wrote %x, want %x after it", start, got, want)
		}
	}
	c := Reading(NewReader(want))
	var y codecValues
	y.walk(&c)
	if err := c.R.End(); err != nil || !reflect.DeepEqual(x, y) {
		t.Fatalf("read %+v, %v; want %+v", y, err, x)
	}
	c = Writing(nil)
	c.Append(AppendString(c.Written(), "x"))
	if got := c.Written(); !bytes.Equal(got, []byte{1, 'x'}) {
		t.Fatalf("Append wrote %x", got)
	}
}
