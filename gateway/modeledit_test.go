package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
)

// editSteps are the steps an edit may start from by the model: first,
// the first step after the furthest position any node has served of the
// job (0 if none), and low, the step of the job's current edit (an edit
// starts at or after it).
func (j *mJob) editSteps() (first, low uint64) {
	j.t.Helper()
	if j.served {
		var err error
		if first, err = j.steps().After(j.sEpoch, j.sEnd); err != nil {
			j.t.Fatal(err)
		}
	}
	if j.head != "" {
		low = j.headStep
	}
	return first, low
}

// edit tries an edit of kind (jobmodel.Exclude, or jobmodel.Append on
// mLines) of the named job, posted to node, from a step ahead of what
// its nodes have served or behind it, and holds the answer to the model:
// an edit ahead is made (201), from the epoch and position the model
// counts the step to, and the model takes it; one behind is refused, 409
// naming the model's first editable step, or 400 if it is also before
// the job's current edit's step. It reports whether an edit was made.
func (j *mJob) edit(node int, kind string, ahead bool) bool {
	j.t.Helper()
	first, low := j.editSteps()
	steps := j.steps()
	var s uint64
	switch {
	case ahead:
		s = max(first, low)
		if j.r.IntN(3) > 0 {
			n, _ := j.length(0)
			s += uint64(j.r.IntN(2*j.cut.Batches(n) + 1))
		}
		if e, _, _, ok, _ := steps.At(s); !ok || e > 2 {
			s = max(first, low)
		}
		if e, _, _, ok, _ := steps.At(s); !ok || e > 2 {
			return false
		}
	case first > low:
		s = low + uint64(j.r.IntN(int(first-low)))
	case low > 0:
		s = uint64(j.r.IntN(int(low)))
	default:
		return false
	}
	epoch, _, pos, _, err := steps.At(s)
	if err != nil {
		j.t.Fatal(err)
	}
	j.t.Logf("node %d: an %s from step %d (position %d of epoch %d), ahead %v: the first editable step %d, the current edit's %d", node, kind, s, pos, epoch, ahead, first, low)
	body := map[string]any{"from_step": s}
	if j.head != "" {
		body["previous"] = j.head
	}
	current := j.model.Version(1 << 62)
	var x jobmodel.Edit
	var grown *mVersion
	switch kind {
	case jobmodel.Exclude:
		x = jobmodel.Edit{Kind: kind, Epoch: epoch, Pos: pos, IDs: j.pickIDs(current)}
		var keys []string
		for _, id := range x.IDs {
			keys = append(keys, j.w.newest(j.ds).keys[id])
		}
		body["keys"] = keys
	case jobmodel.Append:
		grown = j.w.newest(mLines)
		if len(grown.counts) == len(current) {
			grown = j.w.grow(j.t, j.nodes.gws)
		}
		x = jobmodel.Edit{Kind: kind, Epoch: epoch, Pos: pos, OldChunks: len(current), Counts: grown.counts}
		body["index"] = grown.id
	}
	b, _ := json.Marshal(body)
	path := fmt.Sprintf("/jobs/%s/%s?%s", j.q.Get("job"), kind, j.query(jobmodel.Cut{B: j.cut.B, World: j.cut.World, DropLast: j.cut.DropLast}, -1).Encode())
	resp, answer := do(j.t, http.MethodPost, j.nodes.urls[node]+path, b, "Content-Type", "application/json")
	j.asked = j.asked || len(j.nodes.urls) > 1
	if !ahead {
		var e api.Error
		want := http.StatusConflict
		if s < low {
			want = http.StatusBadRequest
		}
		if resp.StatusCode != want || json.Unmarshal(answer, &e) != nil {
			j.t.Fatalf("node %d: an %s from step %d, behind the first editable step %d (its current edit's %d): %s %s; want %d", node, kind, s, first, low, resp.Status, answer, want)
		}
		if want == http.StatusConflict && (e.FirstEditableStep == nil || *e.FirstEditableStep != first) {
			j.t.Fatalf("node %d: an %s from step %d: %s names first_editable_step %v; the model's is %d", node, kind, s, answer, e.FirstEditableStep, first)
		}
		return false
	}
	var made struct {
		Version      string `json:"version"`
		Epoch        uint64 `json:"epoch"`
		FromPosition int    `json:"from_position"`
		Samples      int    `json:"samples"`
		NewSamples   int    `json:"new_samples"`
		Previous     string `json:"previous"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(answer, &made) != nil {
		j.t.Fatalf("node %d: an %s from step %d (first editable %d, current edit's %d): %s %s; want 201", node, kind, s, first, low, resp.Status, answer)
	}
	if made.Epoch != epoch || made.FromPosition != pos || made.Previous != j.head {
		j.t.Fatalf("node %d: an %s from step %d made %s; the model counts the step to position %d of epoch %d after %q", node, kind, s, answer, pos, epoch, j.head)
	}
	j.model.Chain = append(j.model.Chain, x)
	switch kind {
	case jobmodel.Exclude:
		all := map[int]bool{}
		for _, e := range j.model.Chain {
			for _, id := range e.IDs {
				all[id] = true
			}
		}
		if made.Samples != len(all) {
			j.t.Fatalf("an exclusion: %s; the job's exclusions list %d samples", answer, len(all))
		}
	case jobmodel.Append:
		if want := sumOf(grown.counts) - sumOf(current); made.NewSamples != want {
			j.t.Fatalf("an append: %s; the version adds %d samples", answer, want)
		}
	}
	j.head, j.headStep = made.Version, s
	clear(j.cache)
	return true
}

// pickIDs are the samples of an exclusion of the job's version of counts
// current: every sample of one chunk (once in three), or one to four
// samples, some perhaps excluded already.
func (j *mJob) pickIDs(current []int) []int {
	if j.r.IntN(3) == 0 {
		c := j.r.IntN(len(current))
		first := sumOf(current[:c])
		var ids []int
		for id := first; id < first+current[c]; id++ {
			ids = append(ids, id)
		}
		if len(ids) > 0 {
			return ids
		}
	}
	var ids []int
	for range 1 + j.r.IntN(4) {
		if id := j.r.IntN(sumOf(current)); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func sumOf(counts []int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
