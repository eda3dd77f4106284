//go:build !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"reflect"
	"testing"

	"github.com/workron/workron/fsm"
)

// TestSubmitKeepsEveryField submits a job with every field of NewJob set,
// found by reflection, and checks that the stored job has each of them in
// its field of the same name: a field added to NewJob but not to the copy
// in submit (applier.newJob), or one store.Job lacks, fails here by name.
// It needs protocol 3 (TraceParent). (That each field survives the log
// entry is TestEncoding's EveryFieldRoundTrips; the record, store's
// TestEveryJobFieldIsInTheRecord.)
func TestSubmitKeepsEveryField(t *testing.T) {
	h := setup(t)
	var nj fsm.NewJob
	v := reflect.ValueOf(&nj).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch name {
		case "DependsOn":
			continue // ids are resolved, not copied: TestSubmit covers them
		case "Payload":
			nj.Payload = []byte(`{"n":1}`)
			continue
		case "RunAt":
			nj.RunAt = ns(t0) + 1e9 // after the entry's time, which it would otherwise be
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("v-" + name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(10 + i))
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"k-" + name: "v"}))
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"v-" + name}))
		case reflect.Struct:
			for k := range f.NumField() {
				switch g := f.Field(k); g.Kind() {
				case reflect.Int, reflect.Int64:
					g.SetInt(int64(100*i + k + 1))
				case reflect.Float64:
					g.SetFloat(0.25)
				default:
					t.Fatalf("NewJob.%s: no value for a %s", name, g.Type())
				}
			}
		default:
			t.Fatalf("NewJob.%s: no value for a %s", name, f.Type())
		}
	}
	res := h.ok(submit(nj))
	got := reflect.ValueOf(h.job(res.Jobs[0].ID)).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "DependsOn" {
			continue
		}
		g := got.FieldByName(name)
		if !g.IsValid() {
			t.Errorf("store.Job has no field %s, which NewJob has", name)
			continue
		}
		if want := v.Field(i).Interface(); !reflect.DeepEqual(g.Interface(), want) {
			t.Errorf("stored job's %s is %v, want %v: does submit copy it?", name, g.Interface(), want)
		}
		if v.Field(i).IsZero() {
			t.Errorf("NewJob.%s was not set by the test", name)
		}
	}
}
