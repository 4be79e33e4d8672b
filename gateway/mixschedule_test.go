package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/shuffle"
)

// testSchedule changes the fixture's mixture at step 5 (within epoch 0:
// 14 steps an epoch with batch 8 × world 4) and ramps to web alone over
// steps [20, 30), across the boundary of epochs 1 and 2.
const testSchedule = "0:web:0.5,code:0.3,books:0.2;5:web:0.2,code:0.2,books:0.6;20~30:web:1,code:0,books:0"

// readEpochs reads every batch of epochs [0, epochs) of q at world ranks,
// and returns each global batch's samples in rank order.
func (m *mixFixture) readEpochs(t *testing.T, base, q string, world, epochs int) [][]mixSample {
	t.Helper()
	var out [][]mixSample
	for e := range epochs {
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s&world=%d", base, e, q, world))
		var info api.EpochInfo
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
			t.Fatalf("epoch %d info: %d %s", e, resp.StatusCode, body)
		}
		for b := range info.Batches {
			var global []mixSample
			for r := range world {
				got, _ := m.readMix(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&world=%d&rank=%d", base, e, b, q, world, r))
				global = append(global, got...)
			}
			out = append(out, global)
		}
	}
	return out
}

// TestScheduleOverHTTP: a schedule over HTTP holds, in every global
// batch (one step), the counts the schedule gives its step; each
// component's samples over three epochs, across two phase changes and a
// ramp, are whole passes, each sample once a pass; /epoch tells each
// epoch's share.
func TestScheduleOverHTTP(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	const world = 4
	q := "mix_schedule=" + url.QueryEscape(testSchedule)
	steps := m.readEpochs(t, srv.url, q, world, 3)
	if len(steps) != 42 {
		t.Fatalf("%d global batches, want 42", len(steps))
	}
	s, err := api.ParseSchedule(testSchedule)
	if err != nil {
		t.Fatal(err)
	}
	phases, _ := s.Phases()
	sizes := []int{300, 120, 20}
	sched, err := shuffle.NewSchedule(phases, []shuffle.Passes{shuffle.EqualPasses(300), shuffle.EqualPasses(120), shuffle.EqualPasses(20)}, 32, 0)
	if err != nil {
		t.Fatal(err)
	}
	streams := make([][]string, 3)
	for st, samples := range steps {
		mo, err := sched.Epoch(uint64(st / 14))
		if err != nil {
			t.Fatal(err)
		}
		want := mo.BlockCounts(st % 14)
		got := make([]int, 3)
		for _, x := range samples {
			got[x.comp]++
			streams[x.comp] = append(streams[x.comp], x.key)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("step %d: counts %v, the schedule's %v", st, got, want)
		}
		if st >= 30 && (got[1] != 0 || got[2] != 0) {
			t.Errorf("step %d, after the ramp to web alone: %v", st, got)
		}
	}
	for i, keys := range streams {
		for p := 0; p < len(keys); p += sizes[i] {
			seen := map[string]bool{}
			for _, k := range keys[p:min(p+sizes[i], len(keys))] {
				if seen[k] {
					t.Fatalf("%s: sample %s twice in one pass (stream position %d)", m.names[i], k, p)
				}
				seen[k] = true
			}
		}
	}
	// /epoch/1 tells where each stream starts: where epoch 0 left it.
	resp, body := get(t, fmt.Sprintf("%s/epoch/1?%s&world=%d", srv.url, q, world))
	var info api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Mix == nil {
		t.Fatalf("epoch info: %d %s", resp.StatusCode, body)
	}
	e0, _ := sched.Epoch(0)
	for i, c := range info.Mix.Components {
		at := uint64(e0.EpochSamples(i))
		if c.FirstPass*uint64(sizes[i])+uint64(c.FirstIndex) != at {
			t.Errorf("epoch 1 starts %s at pass %d index %d, want stream position %d", c.Dataset, c.FirstPass, c.FirstIndex, at)
		}
	}
}

// A schedule of one phase serves its mixture's bytes; the ETag names the
// schedule, so two schedules that agree on a batch still name it apart.
func TestScheduleOnePhaseServesTheMixture(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	one := "mix_schedule=" + url.QueryEscape("0:"+testMix)
	for _, e := range []int{0, 2} {
		for b := range 7 {
			u := fmt.Sprintf("%s/epoch/%d/batch/%d?%%s&world=2&rank=%d", srv.url, e, b, b%2)
			_, a := m.readMix(t, fmt.Sprintf(u, "mix="+testMix))
			_, s := m.readMix(t, fmt.Sprintf(u, one))
			if a != s {
				t.Fatalf("epoch %d batch %d: the one-phase schedule served other bytes than mix=", e, b)
			}
		}
	}
	etag := func(q string) string {
		resp, body := get(t, srv.url+"/epoch/0/batch/0?world=4&"+q)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", q, resp.StatusCode, body)
		}
		return resp.Header.Get("ETag")
	}
	a := etag("mix_schedule=" + url.QueryEscape(testSchedule))
	other := strings.Replace(testSchedule, "20~30", "21~30", 1) // agrees on step 0
	if b := etag("mix_schedule=" + url.QueryEscape(other)); a == b || a == "" {
		t.Fatalf("two schedules share the ETag %q", a)
	}
	if b := etag("mix=" + testMix); a == b {
		t.Fatalf("a schedule and its first phase's mixture share the ETag %q", a)
	}
}

// TestScheduleErrors: each bad schedule is refused with the status that
// says why and a message naming the fault.
func TestScheduleErrors(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	many := make([]string, 10000)
	for i := range many {
		many[i] = fmt.Sprintf("%d:web:1", i)
	}
	for _, tc := range []struct {
		schedule string
		status   int
		says     string
	}{
		{"0:web:0,code:0", http.StatusBadRequest, "sum to 0"},
		{"0:web:NaN,code:1", http.StatusBadRequest, "NaN"},
		{"0:web:-1,code:1", http.StatusBadRequest, "-1"},
		{"0:web:1;9:web:2;4:web:1", http.StatusBadRequest, "increasing step order"},
		{"0:web:1;4~9:web:2;6:web:1", http.StatusBadRequest, "overlap"},
		{"0:web:1;9007199254740992:web:2", http.StatusBadRequest, "2^53"},
		{strings.Join(many, ";"), http.StatusBadRequest, "10000 phases"},
		{"0:web:1,nope:1", http.StatusNotFound, "nope"},
		{"0:web:1;5:code:1", http.StatusBadRequest, "same datasets"},
	} {
		resp, body := get(t, srv.url+"/epoch/0/batch/0?mix_schedule="+url.QueryEscape(tc.schedule))
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("%.50q: %d %.200s; want %d saying %q", tc.schedule, resp.StatusCode, body, tc.status, tc.says)
		}
	}
	resp, body := get(t, srv.url+"/epoch/0/batch/0?mix_schedule=0:web:1&mix=web:1")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("mix= and mix_schedule=: %d %s", resp.StatusCode, body)
	}
}

// TestSchedulePlan: /plan takes a schedule, given or stored, and reports
// what each phase reads.
func TestSchedulePlan(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	var plan struct {
		Mix struct {
			Phases []struct {
				FromStep uint64 `json:"from_step"`
				Steps    int    `json:"steps"`
				Samples  []int  `json:"samples"`
				Bytes    int64  `json:"bytes"`
			} `json:"phases"`
		} `json:"mix"`
	}
	for _, q := range []string{"mix_schedule=" + url.QueryEscape(testSchedule), "job=planned&schedule=latest"} {
		if strings.HasPrefix(q, "job=") {
			resp, body := do(t, http.MethodPut, srv.url+"/jobs/planned/schedule", []byte(`{"schedule": "`+testSchedule+`"}`))
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("PUT: %d %s", resp.StatusCode, body)
			}
		}
		resp, body := get(t, srv.url+"/plan?world=4&epochs=3&"+q)
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &plan) != nil {
			t.Fatalf("%s: %d %.300s", q, resp.StatusCode, body)
		}
		ph := plan.Mix.Phases
		if len(ph) != 3 || ph[0].Steps != 5 || ph[1].Steps != 15 || ph[2].Steps != 22 {
			t.Fatalf("%s: phases %+v", q, ph)
		}
		// The last phase ramps to web alone: from step 30 it reads no code
		// or books.
		if ph[2].Samples[0] <= ph[2].Samples[1] || ph[2].Bytes == 0 {
			t.Fatalf("%s: the ramp's phase %+v", q, ph[2])
		}
	}
}
