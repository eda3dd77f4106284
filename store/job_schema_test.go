package store

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/workron/workron/internal/binenc"
)

// TestEveryJobFieldIsInTheRecord fills every field of a Job, found by
// reflection, with a value of its own, and round-trips the job through its
// binary record: a field added to Job but not to jobCodec fails here, by
// name. (Zero values would hide a missing field: every one is checked to be
// set before the round trip.)
func TestEveryJobFieldIsInTheRecord(t *testing.T) {
	j := new(Job)
	n := 0
	fillAll(t, reflect.ValueOf(j).Elem(), &n)
	v := reflect.ValueOf(j).Elem()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("fillAll left Job.%s zero", v.Type().Field(i).Name)
		}
	}
	got := new(Job)
	if err := decodeJob(mustAppendJob(t, j), got); err != nil {
		t.Fatal(err)
	}
	g := reflect.ValueOf(got).Elem()
	for i := range v.NumField() {
		if want, have := v.Field(i).Interface(), g.Field(i).Interface(); !reflect.DeepEqual(have, want) {
			t.Errorf("Job.%s reads back from its record as %#v, want %#v: is it in jobCodec.job?", v.Type().Field(i).Name, have, want)
		}
	}
	var h JobHead
	if err := decodeJobHead(mustAppendJob(t, j), &h, nil); err != nil || !reflect.DeepEqual(h, j.Head()) {
		t.Errorf("head reads back as %+v, %v; want %+v", h, err, j.Head())
	}
}

// fillAll sets v, and every field and item under it, to a value that is
// not zero and differs from the others (n counts them).
func fillAll(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	*n++
	k := *n
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillAll(t, v.Field(i), n)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", k))
	case reflect.Int, reflect.Int64:
		v.SetInt(-int64(k) << 40)
	case reflect.Uint64:
		v.SetUint(uint64(k) << 40)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float64:
		v.SetFloat(1 / float64(k+2))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillAll(t, p.Elem(), n)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // Payload, Result
			v.SetBytes(fmt.Appendf(nil, `{"n":%d}`, k))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fillAll(t, s.Index(0), n)
		fillAll(t, s.Index(1), n)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			key, val := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fillAll(t, key, n)
			fillAll(t, val, n)
			m.SetMapIndex(key, val)
		}
		v.Set(m)
	default:
		t.Fatalf("fillAll: no value for a %s", v.Type())
	}
}

// TestJobCodecIsTheWalk checks that appendJob and decodeJob, which go
// through the methods walkgen generated (record_gen.go), write and read
// what jobCodec's walk itself does: the generated codec is the walk's.
func TestJobCodecIsTheWalk(t *testing.T) {
	full := new(Job)
	n := 0
	fillAll(t, reflect.ValueOf(full).Elem(), &n)
	jobs := goldenRecords()
	jobs["Reflected"] = full
	for name, j := range jobs {
		v := recordVersion(j)
		w := jobCodec{Codec: binenc.Writing([]byte{v}), version: v}
		w.job(j)
		b := mustAppendJob(t, j)
		if want := w.Written(); !bytes.Equal(b, want) {
			t.Errorf("%s: appendJob wrote\n%x\nthe walk writes\n%x\n(go generate ./store?)", name, b, want)
		}
		r := jobCodec{Codec: binenc.Reading(binenc.NewReader(b[1:])), version: v}
		walked, got := new(Job), new(Job)
		r.job(walked)
		if err := decodeJob(b, got); err != nil || r.R.End() != nil || !reflect.DeepEqual(got, walked) {
			t.Errorf("%s: decodeJob read %+v, %v\nthe walk reads %+v, %v\n(go generate ./store?)", name, got, err, walked, r.R.End())
		}
	}
}
