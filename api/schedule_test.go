package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

func TestParseSchedule(t *testing.T) {
	s, err := ParseSchedule("0:web:0.7,code:0.3;4000:code:0.7,web:0.3;6000~8000:web:0,code:1")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "0:web:0.7,code:0.3;4000:code:0.7,web:0.3;6000~8000:web:0,code:1" {
		t.Errorf("String %q", got)
	}
	ph, err := s.Phases()
	if err != nil {
		t.Fatal(err)
	}
	want := []shuffle.SchedulePhase{
		{Step: 0, Weights: []uint64{7, 3}},
		{Step: 4000, Weights: []uint64{3, 7}}, // in the first phase's order
		{Step: 6000, End: 8000, Weights: []uint64{0, 1}},
	}
	if !reflect.DeepEqual(ph, want) {
		t.Errorf("Phases %+v, want %+v", ph, want)
	}
	if d := s.Datasets(); !reflect.DeepEqual(d, []string{"web", "code"}) {
		t.Errorf("Datasets %v", d)
	}
}

func TestParseScheduleRejects(t *testing.T) {
	many := make([]string, 10000)
	for i := range many {
		many[i] = strings.Repeat("1", 1+i%3) + ":a:1"
	}
	for _, bad := range []string{
		"web:0.7",                        // no step
		"x:web:1",                        // step not a number
		"-1:web:1",                       // negative step
		"0:web:0,code:0",                 // weights sum to 0
		"0:web:NaN,code:1",               // NaN
		"0:web:-0.5,code:1",              // negative
		"0:web:1e3,code:1",               // exponent
		"0:web:0.1234567,code:1",         // too many decimals
		"0:web:1;9007199254740992:web:1", // step 2^53
		"0:web:1;5:web:1;4:web:1",        // out of order
		"0:web:1;5:web:1;5:web:1",        // the same step twice
		"0:web:1;5~9:web:1;8:web:1",      // a ramp overlaps the next phase
		"0:web:1;5~5:web:1",              // a ramp of no steps
		"0:web:1;5~3:web:1",              // a ramp ending before it starts
		"3:web:1",                        // not from step 0
		"0~5:web:1",                      // the first phase a ramp
		"0:web:1;5:code:1",               // another dataset
		"0:web:1,code:1;5:web:1",         // a dataset left out
		"0:web:1,web:2",                  // a dataset twice
		"0:web:1;;5:web:1",               // an empty phase
		strings.Join(many, ";"),          // 10,000 phases
	} {
		if _, err := ParseSchedule(bad); !errors.Is(err, ErrMix) {
			t.Errorf("%.60q: err %v, want ErrMix", bad, err)
		}
	}
	names := make([]string, shuffle.MaxMixComponents+1)
	for i := range names {
		names[i] = "d" + strings.Repeat("x", i) + ":1"
	}
	if _, err := ParseSchedule("0:" + strings.Join(names, ",")); !errors.Is(err, ErrMix) {
		t.Errorf("%d datasets: err %v", len(names), err)
	}
	if _, err := ParseSchedule("0:" + strings.Join(names[:shuffle.MaxMixComponents], ",")); err != nil {
		t.Errorf("%d datasets: %v", shuffle.MaxMixComponents, err)
	}
}

// TestParseScheduleSaysWhy: a refused schedule's error names its fault, as
// a request's 400 body shows it.
func TestParseScheduleSaysWhy(t *testing.T) {
	many := make([]string, 10000)
	for i := range many {
		many[i] = strconv.Itoa(i) + ":web:1"
	}
	for _, tc := range []struct{ schedule, says string }{
		{"0:web:0,code:0", "sum to 0"},
		{"0:web:1,code:1;4:web:0,code:0", "sum to 0"}, // a later phase's
		{"0:web:NaN,code:1", "NaN"},
		{"0:web:-1,code:1", "-1"},
		{"0:web:1;9:web:2;4:web:1", "increasing step order"},
		{"0:web:1;4~9:web:2;6:web:1", "overlap"},
		{"0:web:1;9007199254740992:web:2", "2^53"},
		{strings.Join(many, ";"), "10000 phases"},
		{"0:web:1;5:code:1", "same datasets"},
	} {
		if _, err := ParseSchedule(tc.schedule); !errors.Is(err, ErrMix) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%.50q: %v, want ErrMix saying %q", tc.schedule, err, tc.says)
		}
	}
}

// TestScheduleEdit: an edit keeps the schedule's phases before its step
// and takes its own from there, dropping the later ones (a ramp among
// them); it is refused inside a ramp, when its first phase is not at its
// step, as a ramp from step 0, and when its phases do not parse.
func TestScheduleEdit(t *testing.T) {
	s, err := ParseSchedule("0:web:0.5,code:0.3,books:0.2;6:web:0.6,code:0.3,books:0.1;20~30:web:1,code:0,books:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from             uint64
		next, want, says string // want "": refused, saying says
	}{
		{18, "18:web:0.2,code:0.7,books:0.1", "0:web:0.5,code:0.3,books:0.2;6:web:0.6,code:0.3,books:0.1;18:web:0.2,code:0.7,books:0.1", ""},
		{6, "6~10:web:0,code:1,books:0", "0:web:0.5,code:0.3,books:0.2;6~10:web:0,code:1,books:0", ""},
		{25, "25:web:1,code:1,books:1", "", "inside the ramp"},
		{7, "8:web:1,code:1,books:1", "", "starts with a phase at that step"},
		{0, "0~5:web:1,code:1,books:1", "", "no weights to ramp from"},
		{6, "6:web:NaN,code:1,books:1", "", "NaN"},
	} {
		got, err := s.Edit(tc.from, tc.next)
		switch {
		case tc.want == "" && (!errors.Is(err, ErrMix) || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("edit %q from %d: %v, want ErrMix saying %q", tc.next, tc.from, err, tc.says)
		case tc.want != "" && (err != nil || got.String() != tc.want):
			t.Errorf("edit %q from %d: %v %v, want %s", tc.next, tc.from, got, err, tc.want)
		}
	}
}

func TestResolveNext(t *testing.T) {
	for _, tc := range []struct {
		text string
		from uint64
		want string // "" for an error
	}{
		{"next:web:1,code:1", 41, "41:web:1,code:1"},
		{"next~+50:web:0.2,code:0.8;+100:web:0,code:1", 41, "41~91:web:0.2,code:0.8;141:web:0,code:1"},
		{"next~3000:web:0.4,code:0.6;5000:web:0,code:1", 2500, "2500~3000:web:0.4,code:0.6;5000:web:0,code:1"},
		{"2500:web:1", 2500, ""},         // the gateway chooses the step
		{"next:web:1;next:web:0", 7, ""}, // only the first phase starts there
		{"next~+x:web:1", 7, ""},
		{"next", 7, ""},
		{"", 7, ""},
	} {
		got, err := ResolveNext(tc.text, tc.from)
		if tc.want == "" {
			if !errors.Is(err, ErrMix) {
				t.Errorf("ResolveNext(%q, %d) = %q, %v; want ErrMix", tc.text, tc.from, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ResolveNext(%q, %d) = %q, %v; want %q", tc.text, tc.from, got, err, tc.want)
		}
	}
}

func TestEditFromJSON(t *testing.T) {
	for _, tc := range []struct {
		json string
		want EditFrom
	}{{`12`, EditFrom{Step: 12}}, {`"next"`, EditFrom{Next: true}}, {`0`, EditFrom{}}} {
		var e ScheduleEdit
		if err := json.Unmarshal([]byte(`{"schedule":"x","from_step":`+tc.json+`}`), &e); err != nil || e.FromStep != tc.want {
			t.Errorf("from_step %s: %+v %v; want %+v", tc.json, e.FromStep, err, tc.want)
		}
		if b, _ := json.Marshal(tc.want); string(b) != tc.json {
			t.Errorf("%+v marshals as %s, want %s", tc.want, b, tc.json)
		}
	}
	for _, bad := range []string{`"later"`, `-1`, `1.5`, `"12"`} {
		var e ScheduleEdit
		if err := json.Unmarshal([]byte(`{"from_step":`+bad+`}`), &e); err == nil {
			t.Errorf("from_step %s read as %+v", bad, e.FromStep)
		}
	}
}
