package cli

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/sched"
)

// master status --json prints the launch object where it stood when it
// was a field of master.Status (between "filesystem" and "dir"), and
// nothing else changes: the keys come in the order of a struct with the
// field there (the type moved to package launch).
func TestStatusJSONKeepsLaunchInPlace(t *testing.T) {
	ms := master.Status{ProtocolVersion: 1, Alive: true, AliveReason: `a "quoted", "dir": reason`, Filesystem: "ext4", Dir: "/s", Kind: "tcl"}
	ls := &launch.JobStatus{Via: "slurm", JobID: "12", Launches: 1, Job: sched.Job{ID: "12", State: sched.Running, Raw: "RUNNING"}}
	got, err := json.Marshal(sessionStatus{Status: ms, Launch: ls})
	if err != nil {
		t.Fatal(err)
	}
	// The old layout: master.Status's fields with Launch after Filesystem.
	var fields []reflect.StructField
	st := reflect.TypeFor[master.Status]()
	for f := range st.Fields() {
		fields = append(fields, f)
		if f.Name == "Filesystem" {
			fields = append(fields, reflect.StructField{Name: "Launch", Type: reflect.TypeFor[*launch.JobStatus](), Tag: `json:"launch,omitempty"`})
		}
	}
	old := reflect.New(reflect.StructOf(fields)).Elem()
	msv := reflect.ValueOf(ms)
	for i := range st.NumField() {
		old.FieldByName(st.Field(i).Name).Set(msv.Field(i))
	}
	old.FieldByName("Launch").Set(reflect.ValueOf(ls))
	want, err := json.Marshal(old.Interface())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("master status --json changed:\n got %s\nwant %s", got, want)
	}
	without, _ := json.Marshal(sessionStatus{Status: ms})
	plain, _ := json.Marshal(ms)
	if !bytes.Equal(without, plain) {
		t.Fatalf("not launched:\n got %s\nwant %s", without, plain)
	}
}
