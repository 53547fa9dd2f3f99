package agentd

import (
	"reflect"
	"testing"

	"github.com/olivares-dev/olivares/shared/proto"
)

// fill sets every field of the struct v points to (embedded structs
// included) to a value that is not its zero value: a string its name, a
// bool true, a slice one element.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), v.Type().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(sf.Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Struct:
			fill(t, f)
		case reflect.Slice:
			s := reflect.MakeSlice(f.Type(), 1, 1)
			if e := s.Index(0); e.Kind() == reflect.Struct {
				fill(t, e)
			}
			f.Set(s)
		default:
			t.Fatalf("proto.RunLaunch.%s is a %s, which this test does not fill; teach fill", sf.Name, f.Kind())
		}
	}
}

// TestLaunchCopyKeepsEveryField: a launch is copied by hand from the tunnel's
// proto.RunLaunch into supervisor.LaunchParams; every field of the
// wire body reaches the supervisor under its own name, so a field added to
// one and forgotten in supervisorLaunch fails here, not in a journey.
func TestLaunchCopyKeepsEveryField(t *testing.T) {
	var p proto.RunLaunch
	fill(t, reflect.ValueOf(&p).Elem())
	got := reflect.ValueOf(supervisorLaunch(p))
	want := reflect.ValueOf(p)
	for _, sf := range reflect.VisibleFields(want.Type()) {
		if sf.Anonymous {
			continue
		}
		dst := got.FieldByName(sf.Name)
		if !dst.IsValid() {
			t.Errorf("proto.RunLaunch.%s has no field of that name in supervisor.LaunchParams; add one, or say in supervisorLaunch why the agent does not need it", sf.Name)
			continue
		}
		src := want.FieldByIndex(sf.Index)
		if sf.Name == "Grants" {
			// proto.Grant becomes supervisor.Grant, field by field.
			if dst.Len() != src.Len() {
				t.Fatalf("LaunchParams.Grants has %d grants, want %d", dst.Len(), src.Len())
			}
			sameFields(t, "Grant", dst.Index(0), src.Index(0))
			continue
		}
		if !reflect.DeepEqual(dst.Interface(), src.Interface()) {
			t.Errorf("supervisor.LaunchParams.%s = %v, want proto.RunLaunch.%s %v: supervisorLaunch does not copy it", sf.Name, dst.Interface(), sf.Name, src.Interface())
		}
	}
}

// sameFields checks that every field of src has its value under the same
// name in dst.
func sameFields(t *testing.T, typ string, dst, src reflect.Value) {
	t.Helper()
	for _, sf := range reflect.VisibleFields(src.Type()) {
		d := dst.FieldByName(sf.Name)
		if !d.IsValid() || !reflect.DeepEqual(d.Interface(), src.FieldByIndex(sf.Index).Interface()) {
			t.Errorf("%s.%s is not copied to the supervisor's %s", typ, sf.Name, typ)
		}
	}
}
