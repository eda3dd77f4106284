package binenc_test

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/workron/workron/internal/binenc"
)

// TestNamesAreInterned: equal strings read through one Interner share their
// bytes (one allocation), maps read through it equal StringMap's, and an
// Interner stops keeping values at MaxInterned.
func TestNamesAreInterned(t *testing.T) {
	m := map[string]string{"REGION": "eu", "FORMAT": "pdf"}
	var b []byte
	b = binenc.AppendString(b, "default")
	b = binenc.AppendMap(b, m)
	b = binenc.AppendString(b, "default")
	b = binenc.AppendMap(b, m)
	b = binenc.AppendMap(b, nil)
	in := make(binenc.Interner)
	r := binenc.NewUTF8Reader(b)
	q1, m1, q2, m2, none := r.Name(in), r.NameMap(in), r.Name(in), r.NameMap(in), r.NameMap(in)
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	if q1 != "default" || !reflect.DeepEqual(m1, m) || !reflect.DeepEqual(m2, m) || none != nil {
		t.Fatalf("read %q %v %v %v", q1, m1, m2, none)
	}
	if unsafe.StringData(q1) != unsafe.StringData(q2) || unsafe.StringData(m1["REGION"]) != unsafe.StringData(m2["REGION"]) {
		t.Error("equal strings read through one Interner are separate copies")
	}
	for k := range m2 {
		if _, ok := in[k]; !ok {
			t.Errorf("key %q not interned", k)
		}
	}

	big := make(binenc.Interner)
	for i := range binenc.MaxInterned + 10 {
		big.String([]byte{byte(i), byte(i >> 8)})
	}
	if len(big) != binenc.MaxInterned {
		t.Errorf("interner holds %d strings, want at most %d", len(big), binenc.MaxInterned)
	}
	if s := binenc.Interner(nil).String([]byte("x")); s != "x" {
		t.Errorf("nil interner: %q", s)
	}
}

// TestNameChecksUTF8: Name fails as Str does on a string that is not UTF-8.
func TestNameChecksUTF8(t *testing.T) {
	r := binenc.NewUTF8Reader(binenc.AppendString(nil, "\xff"))
	if s := r.Name(make(binenc.Interner)); s != "" || r.Err() == nil {
		t.Errorf("Name of bad UTF-8 = %q, err %v", s, r.Err())
	}
}
