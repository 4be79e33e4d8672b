package nodestate

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestStateWire: a state reads as nodes of earlier releases wrote it —
// the transform stage's load under transform_load with its figures'
// names (tensorize.Load's, which this type took over) — and round trips.
func TestStateWire(t *testing.T) {
	const wire = `{"self":1,"ready":true,"datasets":[{"name":"d","current":"b","held":["b","a"]}],"url":"http://n1",` +
		`"transforms":{"tiny":"0123456789abcdef"},"transform_load":{"queued":20,"workers":2,"per_image_ns":2000000},"down":["http://n2"]}`
	want := State{Self: 1, Ready: true, Datasets: []DatasetState{{Name: "d", Current: "b", Held: []string{"b", "a"}}}, URL: "http://n1",
		Transforms: map[string]string{"tiny": "0123456789abcdef"}, Load: &Load{Queued: 20, Workers: 2, PerImage: 2 * time.Millisecond},
		Down: []string{"http://n2"}}
	var got State
	if err := json.Unmarshal([]byte(wire), &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v (%v), want %+v", got, err, want)
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip %s gave %+v (%v)", b, back, err)
	}
}

func TestHolds(t *testing.T) {
	st := &State{Datasets: []DatasetState{{Name: "d", Current: "b", Held: []string{"b", "a"}}}}
	tests := []struct {
		st       *State
		name, id string
		want     bool
	}{
		{st, "d", "b", true},
		{st, "d", "a", true},
		{st, "d", "c", false},
		{st, "e", "b", false},
		{nil, "d", "c", true}, // not probed yet: a request finds out
	}
	for _, tt := range tests {
		if got := tt.st.Holds(tt.name, tt.id); got != tt.want {
			t.Errorf("Holds(%q, %q) on %v = %v, want %v", tt.name, tt.id, tt.st != nil, got, tt.want)
		}
	}
}

func TestLoadWait(t *testing.T) {
	tests := []struct {
		l    Load
		want time.Duration
	}{
		{Load{Queued: 10, Workers: 2, PerImage: 2 * time.Millisecond}, 10 * time.Millisecond},
		{Load{Queued: 10, Workers: 0, PerImage: time.Millisecond}, 0}, // no workers: no stage to wait for
		{Load{Workers: 4}, 0},
	}
	for _, tt := range tests {
		if got := tt.l.Wait(); got != tt.want {
			t.Errorf("%+v.Wait() = %v, want %v", tt.l, got, tt.want)
		}
	}
}
