package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/s3backend"
)

// The importance state's bounds, each a defect of an earlier release:
// one job's feedback evicted by other jobs' posts, concurrent seals of an
// epoch sealing different versions, seals writing without limit, and
// feedback bodies decoded whole.

// trySeal seals an epoch and returns the status and the answer, without
// failing the test: it is called from other goroutines.
func trySeal(base, job string, epoch int, prev string) (int, sealed, error) {
	url := fmt.Sprintf("%s/importance/%s/seal?epoch=%d", base, job, epoch)
	if prev != "" {
		url += "&prev=" + prev
	}
	resp, err := http.Post(url, "", nil)
	if err != nil {
		return 0, sealed{}, err
	}
	defer resp.Body.Close()
	var s sealed
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&s)
	}
	return resp.StatusCode, s, err
}

// tryFeedback posts binary feedback and returns the status.
func tryFeedback(base, job string, epoch int, ids []int, losses []float32) (int, error) {
	url := fmt.Sprintf("%s/importance/%s/feedback?epoch=%d", base, job, epoch)
	resp, err := http.Post(url, "application/octet-stream", bytes.NewReader(binaryFeedback(ids, losses)))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// importanceObjects lists a job's epoch pointers and snapshots in st.
func importanceObjects(t *testing.T, st s3backend.Store, job string) (pointers, snapshots []string) {
	t.Helper()
	objs, err := st.List(t.Context(), "_brand/importance/"+job+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch {
		case strings.Contains(o.Key, "/epochs/"):
			pointers = append(pointers, o.Key)
		case strings.HasSuffix(o.Key, ".brandimp"):
			snapshots = append(snapshots, o.Key)
		default:
			t.Errorf("unexpected object %s", o.Key)
		}
	}
	return pointers, snapshots
}

// TestImportanceJobsCannotEvictEachOther: other jobs' feedback, however
// much of it, never erases a job's: past the job slots a new job is told
// to come back (503 with Retry-After), and the job keeps all it reported.
// A seal of an epoch nobody reported is refused, not sealed empty.
func TestImportanceJobsCannotEvictEachOther(t *testing.T) {
	f := newFixture(t, 8, 8)
	_, srv := start(t, f.store, nil)
	feedEpoch(t, srv.URL, f, "victim", 0)
	var refused int
	for i := range 40 {
		url := fmt.Sprintf("%s/importance/other-%d/feedback?epoch=0", srv.URL, i)
		resp, body := post(t, url, "application/json", []byte(`{"ids":[1],"losses":[1]}`))
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "job") {
				t.Errorf("job %d refused without Retry-After or a message: %s", i, body)
			}
			refused++
		default:
			t.Fatalf("job %d: %s: %s", i, resp.Status, body)
		}
	}
	if refused == 0 {
		t.Error("40 jobs' feedback all accepted: the job slots are not bounded")
	}
	s := seal(t, srv.URL, "victim", 0, "")
	if s.Reported != f.index.NumSamples() {
		t.Fatalf("after other jobs' feedback the victim sealed %d reported samples, want %d", s.Reported, f.index.NumSamples())
	}
	resp, body := post(t, srv.URL+"/importance/nobody/seal?epoch=0", "", nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "no feedback") {
		t.Fatalf("sealing an epoch without feedback: %s: %s; want 409 and why", resp.Status, body)
	}
}

// TestImportanceConcurrentSealsConverge: 40 seals of one epoch racing
// with feedback answer one version, the stored pointer names it, and
// every feedback accepted is in it while every one refused (409, after
// the seal) is not.
func TestImportanceConcurrentSealsConverge(t *testing.T) {
	f := newFixture(t, 8, 8)
	n := f.index.NumSamples()
	_, srv := start(t, f.store, nil)
	ids := make([]int, n)
	base := make([]float32, n)
	for i := range n {
		ids[i], base[i] = i, 0.5
	}
	if code, err := tryFeedback(srv.URL, "race", 0, ids, base); err != nil || code != http.StatusOK {
		t.Fatalf("feedback: %d %v", code, err)
	}
	const seals = 40
	versions := make([]string, seals)
	fed := make([]int, seals)
	var wg sync.WaitGroup
	for i := range seals {
		wg.Go(func() {
			code, s, err := trySeal(srv.URL, "race", 0, "")
			if err != nil || code != http.StatusOK {
				t.Errorf("seal %d: %d %v", i, code, err)
			}
			versions[i] = s.Version
		})
		wg.Go(func() {
			code, err := tryFeedback(srv.URL, "race", 0, []int{i}, []float32{10 + float32(i)})
			if err != nil || code != http.StatusOK && code != http.StatusConflict {
				t.Errorf("feedback %d: %d %v", i, code, err)
			}
			fed[i] = code
		})
	}
	wg.Wait()
	slices.Sort(versions)
	if d := slices.Compact(slices.Clone(versions)); len(d) != 1 {
		t.Fatalf("40 concurrent seals answered %d versions: %v", len(d), d)
	}
	v, err := dataset.ReadSealed(t.Context(), f.store, "race", 0)
	if err != nil || v != versions[0] {
		t.Fatalf("the stored pointer names %q (%v); the seals answered %s", v, err, versions[0])
	}
	snap, err := dataset.ReadSnapshot(t.Context(), f.store, f.index, "race", v)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seals {
		got, accepted := snap.Score(i), fed[i] == http.StatusOK
		if accepted && got != 10+float32(i) || !accepted && got != 0.5 {
			t.Errorf("sample %d: feedback answered %d, sealed score %v", i, fed[i], got)
		}
	}
}

// TestImportanceSealsConvergeAcrossGateways: two gateways over one store,
// each holding different feedback, sealing one epoch at once: the first
// pointer written wins and every seal on either answers its version.
func TestImportanceSealsConvergeAcrossGateways(t *testing.T) {
	f := newFixture(t, 8, 8)
	n := f.index.NumSamples()
	var urls []string
	for g := range 2 {
		_, srv := start(t, f.store, nil)
		urls = append(urls, srv.URL)
		ids, losses := make([]int, n), make([]float32, n)
		for i := range n {
			ids[i], losses[i] = i, float32(g+1)
		}
		if code, err := tryFeedback(srv.URL, "two", 0, ids, losses); err != nil || code != http.StatusOK {
			t.Fatalf("feedback: %d %v", code, err)
		}
	}
	const seals = 20
	versions := make([]string, 2*seals)
	var wg sync.WaitGroup
	for i := range versions {
		wg.Go(func() {
			code, s, err := trySeal(urls[i%2], "two", 0, "")
			if err != nil || code != http.StatusOK {
				t.Errorf("seal %d: %d %v", i, code, err)
			}
			versions[i] = s.Version
		})
	}
	wg.Wait()
	slices.Sort(versions)
	if d := slices.Compact(slices.Clone(versions)); len(d) != 1 {
		t.Fatalf("seals on two gateways answered %d versions: %v", len(d), d)
	}
	if v, err := dataset.ReadSealed(t.Context(), f.store, "two", 0); err != nil || v != versions[0] {
		t.Fatalf("the stored pointer names %q (%v); the seals answered %s", v, err, versions[0])
	}
	if _, snaps := importanceObjects(t, f.store, "two"); len(snaps) != 1 {
		t.Errorf("the store holds %d snapshots of the job, want the winner's alone: %v", len(snaps), snaps)
	}
}

// putCounter counts the objects a store writes, through its Observer.
type putCounter struct{ puts, deletes atomic.Int64 }

func (c *putCounter) ObserveBackend(op string, _ int64, _ time.Duration, err error) {
	switch {
	case err != nil:
	case op == s3backend.OpPut:
		c.puts.Add(1)
	case op == s3backend.OpDelete:
		c.deletes.Add(1)
	}
}

// TestImportanceSealsKeepTheLastEpochs: sealing a job's epochs one after
// another keeps the last few epochs' pointers and snapshots, not all of
// them, and the last is still read.
func TestImportanceSealsKeepTheLastEpochs(t *testing.T) {
	f := newFixture(t, 8, 8)
	_, srv := start(t, f.store, nil)
	prev := ""
	for e := range 10 {
		feedEpoch(t, srv.URL, f, "long", e)
		prev = seal(t, srv.URL, "long", e, prev).Version
	}
	pointers, snaps := importanceObjects(t, f.store, "long")
	const keep = 4
	if len(pointers) > keep || len(snaps) > keep {
		t.Fatalf("after 10 epochs the store holds %d pointers and %d snapshots, want at most %d of each:\n%v\n%v", len(pointers), len(snaps), keep, pointers, snaps)
	}
	for e := 10 - keep; e < 10; e++ {
		v, err := dataset.ReadSealed(t.Context(), f.store, "long", uint64(e))
		if err != nil {
			t.Fatalf("epoch %d, among the last %d, lost its pointer: %v", e, keep, err)
		}
		if _, err := dataset.ReadSnapshot(t.Context(), f.store, f.index, "long", v); err != nil {
			t.Fatalf("epoch %d's snapshot %s: %v", e, v, err)
		}
	}
	q := "seed=1&window=2&batch_size=16&sampling=importance&job=long&importance=" + prev
	readImportanceEpoch(t, f, srv.URL, 10, q)
}

// TestImportanceResealingWritesNothing: sealing one epoch 300 times, with
// feedback between, writes what one seal writes and answers one version.
func TestImportanceResealingWritesNothing(t *testing.T) {
	f := newFixture(t, 8, 8)
	var writes putCounter
	st, err := s3backend.Open(t.Context(), f.dir, s3backend.Config{Observer: &writes})
	if err != nil {
		t.Fatal(err)
	}
	_, srv := start(t, st, nil)
	feedEpoch(t, srv.URL, f, "many", 0)
	before := writes.puts.Load()
	first := ""
	for i := range 300 {
		code, err := tryFeedback(srv.URL, "many", 0, []int{i % f.index.NumSamples()}, []float32{5 + float32(i)})
		if err != nil || code != http.StatusOK && code != http.StatusConflict {
			t.Fatalf("feedback %d: %d %v", i, code, err)
		}
		s := seal(t, srv.URL, "many", 0, "")
		if first == "" {
			first = s.Version
		} else if s.Version != first {
			t.Fatalf("seal %d of one epoch answered %s, the first %s", i, s.Version, first)
		}
	}
	if w := writes.puts.Load() - before; w > 2 {
		t.Errorf("300 seals of one epoch wrote %d objects; one seal writes 2 (a snapshot and the pointer)", w)
	}
	if pointers, snaps := importanceObjects(t, f.store, "many"); len(pointers) != 1 || len(snaps) != 1 {
		t.Errorf("300 seals of one epoch left %d pointers and %d snapshots", len(pointers), len(snaps))
	}
}
