package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/brandgw/brand/api"
)

// TestRunsOverHTTP: a run job's batch serves batch_size runs of run=K
// records each, every run K samples of one chunk in the index's order,
// named by Brand-Run; /epoch/N counts runs.
func TestRunsOverHTTP(t *testing.T) {
	f := newFixture(t, 4, 7) // 2 runs of 3 a chunk, a record left over
	_, srv := start(t, f.store, nil)
	const q = "?seed=5&window=2&batch_size=3&run=3"
	resp, body := get(t, srv.URL+"/epoch/0/batch/0"+q)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderRun) != "3" || resp.Header.Get(api.HeaderBatchSamples) != "9" ||
		resp.Header.Get(api.HeaderEpochSamples) != "8" {
		t.Fatalf("batch 0: %s, headers %v", resp.Status, resp.Header)
	}
	smp := readTar(t, body)
	key := map[string]int{} // sample key → ID, in the index's order
	for id := range f.index.NumSamples() {
		key[f.index.SampleKey(id)] = id
	}
	for r := 0; r < len(smp); r += 3 {
		first, ok := key[smp[r].key]
		c := f.index.ChunkOf(first)
		lo, _ := f.index.ChunkRange(c)
		if !ok || (first-lo)%3 != 0 || first-lo+3 > 7 {
			t.Fatalf("run %d starts at %q, not a run's first record", r/3, smp[r].key)
		}
		for k := 1; k < 3; k++ {
			if key[smp[r+k].key] != first+k {
				t.Fatalf("run %d: record %d is %q, want sample %d", r/3, k, smp[r+k].key, first+k)
			}
		}
	}
	resp, body = get(t, srv.URL+"/epoch/0"+q)
	var info api.EpochInfo
	if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil || info.Samples != 8 || info.Batches != 3 {
		t.Fatalf("/epoch/0: %s %+v; want 8 runs in 3 batches", resp.Status, info)
	}
}
