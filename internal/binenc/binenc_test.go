package binenc_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/workron/workron/internal/binenc"
)

func TestRoundTrip(t *testing.T) {
	seven := -7
	var b []byte
	b = binenc.AppendUvarint(b, 1<<40)
	b = binenc.AppendVarint(b, math.MinInt64)
	b = binenc.AppendInt(b, -1)
	b = binenc.AppendTime(b, -5)
	b = binenc.AppendFloat(b, math.Copysign(0, -1))
	b = binenc.AppendFloat(b, 0.25)
	b = binenc.AppendBool(b, true)
	b = binenc.AppendString(b, "héllo")
	b = binenc.AppendBytes(b, nil)
	b = binenc.AppendStrings(b, []string{"a", ""})
	b = binenc.AppendMap(b, map[string]string{"b": "2", "a": "1"})
	b = binenc.AppendIntPtr(b, &seven)
	b = binenc.AppendIntPtr(b, nil)
	b = append(b, 42)

	r := binenc.NewUTF8Reader(b)
	got := []any{r.Uvarint(), r.Varint(), r.Int(), r.Time(), math.Signbit(r.Float()), r.Float(), r.Bool(), r.Str(),
		r.Bytes(), r.Strings(), r.StringMap(), *r.IntPtr(), r.IntPtr(), r.Byte()}
	want := []any{uint64(1 << 40), int64(math.MinInt64), -1, int64(-5), false, 0.25, true, "héllo",
		[]byte(nil), []string{"a", ""}, map[string]string{"a": "1", "b": "2"}, -7, (*int)(nil), byte(42)}
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %#v\nwant %#v", got, want)
	}
	if a, b := binenc.AppendMap(nil, map[string]string{"x": "1", "y": "2", "z": "3"}), binenc.AppendMap(nil, map[string]string{"z": "3", "y": "2", "x": "1"}); string(a) != string(b) {
		t.Fatal("one map encoded two ways")
	}
}

func TestReaderRefusesBadBytes(t *testing.T) {
	cases := []struct {
		name, want string
		b          []byte
		read       func(r *binenc.Reader)
	}{
		{"ShortByte", "short byte", nil, func(r *binenc.Reader) { r.Byte() }},
		{"BadUvarint", "bad uvarint", []byte{0x80, 0x80}, func(r *binenc.Reader) { r.Uvarint() }},
		{"UvarintOverflow", "bad uvarint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}, func(r *binenc.Reader) { r.Int() }},
		{"HugeCount", "count past the end", binenc.AppendUvarint(nil, 1<<40), func(r *binenc.Reader) { r.Strings() }},
		{"CountOfBigItems", "count past the end", []byte{3, 0, 0, 0, 0, 0}, func(r *binenc.Reader) { r.Count(2) }},
		{"LongString", "length past the end", []byte{5, 'a'}, func(r *binenc.Reader) { r.Str() }},
		{"NotUTF8", "not UTF-8", []byte{1, 0xff}, func(r *binenc.Reader) { r.Str() }},
		{"NotUTF8InAMap", "not UTF-8", []byte{1, 1, 'k', 1, 0xff}, func(r *binenc.Reader) { r.StringMap() }},
		{"BadBool", "bad bool", []byte{2}, func(r *binenc.Reader) { r.Bool() }},
		{"ShortTime", "short time", []byte{1, 2, 3}, func(r *binenc.Reader) { r.Time() }},
		{"NaN", "not a number", binenc.AppendTime(nil, int64(math.Float64bits(math.NaN()))), func(r *binenc.Reader) { r.Float() }},
		{"Infinity", "not a number", binenc.AppendTime(nil, int64(math.Float64bits(math.Inf(-1)))), func(r *binenc.Reader) { r.Float() }},
		{"TrailingBytes", "trailing bytes", []byte{1, 2}, func(r *binenc.Reader) { r.Byte() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := binenc.NewUTF8Reader(c.b)
			c.read(&r)
			err := r.End()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			// The error sticks, and later reads read nothing.
			if r.Uvarint() != 0 || r.Str() != "" || r.Left() != 0 || r.Err() != err {
				t.Fatal("a read after the error returned something")
			}
		})
	}
	t.Run("PlainReaderTakesAnyBytes", func(t *testing.T) {
		r := binenc.NewReader([]byte{1, 0xff})
		if s := r.Str(); s != "\xff" || r.End() != nil {
			t.Fatalf("read %q, %v", s, r.Err())
		}
	})
}
