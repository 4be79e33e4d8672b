package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
)

// mJob is a round's job of samples — over one dataset (mTar, mLines),
// named, edited as it runs; or a mixture of two — followed by the model:
// its parameters, its order (jobmodel.Job or jobmodel.Mixture), what its
// nodes have served of it, and every batch read, to read again.
type mJob struct {
	t     *testing.T
	r     *rand.Rand
	w     *mWorld
	nodes *mNodes

	ds    string     // the dataset; "" for a mixture
	comps []string   // a mixture's components
	q     url.Values // the job's parameters but rank, offset and the cut's
	cut   jobmodel.Cut
	local bool // ranks assigned by locality: on a cluster, world > 1, not balanced
	bytes bool // balance=bytes

	model *jobmodel.Job
	mix   *jobmodel.Mixture
	cache map[uint64][]string

	// served is the furthest position any node has served of the named
	// job; head the chain's current edit and headStep its step.
	served   bool
	sEpoch   uint64
	sEnd     int
	head     string
	headStep uint64
	asked    bool // an edit asked the cluster's other members to hold the job

	reads []mRead
}

// mRead is a batch read: its path and query, the node it was read from,
// its ETag and body.
type mRead struct {
	path       string
	node       int
	etag       string
	body       []byte
	assignment string
}

// order is epoch's order as the keys of its samples (a mixture's draws'
// samples).
func (j *mJob) order(epoch uint64) []string {
	j.t.Helper()
	if o, ok := j.cache[epoch]; ok {
		return o
	}
	var keys []string
	if j.mix != nil {
		draws, err := j.mix.Order(epoch)
		if err != nil {
			j.t.Fatal(err)
		}
		for _, d := range draws {
			keys = append(keys, j.w.first(j.comps[d.Component]).keys[d.ID])
		}
	} else {
		ids, err := j.model.Order(epoch)
		if err != nil {
			j.t.Fatal(err)
		}
		newest := j.w.newest(j.ds)
		for _, id := range ids {
			keys = append(keys, newest.keys[id])
		}
	}
	j.cache[epoch] = keys
	return keys
}

// length is epoch's samples, by the model.
func (j *mJob) length(epoch uint64) (int, error) { return len(j.order(epoch)), nil }

// steps counts the job's steps under its own cut, as its edits do.
func (j *mJob) steps() jobmodel.Steps {
	c := j.cut
	c.Offset = 0
	return jobmodel.Steps{Cut: c, Len: j.length}
}

// query is the job's parameters under cut, for rank (-1: none).
func (j *mJob) query(cut jobmodel.Cut, rank int) url.Values {
	q := url.Values{}
	for k, v := range j.q {
		q[k] = v
	}
	q.Set("batch_size", strconv.Itoa(cut.B))
	q.Set("world", strconv.Itoa(cut.World))
	q.Set("drop_last", strconv.FormatBool(cut.DropLast))
	if cut.Offset > 0 {
		q.Set("offset", strconv.Itoa(cut.Offset))
	}
	if rank >= 0 {
		q.Set("rank", strconv.Itoa(rank))
	}
	return q
}

// assignment is how the job's ranks take a global batch.
func (j *mJob) assignment() string {
	switch {
	case j.bytes:
		return "balance"
	case j.local:
		return "locality"
	}
	return "plain"
}

// epochInfo asks node for /epoch/e under cut and holds its counts to the
// model's.
func (j *mJob) epochInfo(node int, e uint64, cut jobmodel.Cut) {
	j.t.Helper()
	n, _ := j.length(e)
	resp, body := get(j.t, fmt.Sprintf("%s/epoch/%d?%s", j.nodes.urls[node], e, j.query(cut, 0).Encode()))
	var info api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
		j.t.Fatalf("/epoch/%d (%+v): %s %s", e, cut, resp.Status, body)
	}
	if info.Samples != n || info.Batches != cut.Batches(n) {
		j.t.Fatalf("/epoch/%d (%+v): %d samples in %d batches; the model: %d in %d", e, cut, info.Samples, info.Batches, n, cut.Batches(n))
	}
}

// step reads global batch m of epoch e under cut, each rank from the
// node pick names, and holds it to the model: the epoch's samples and
// batches in its headers, every sample's bytes its source's, and the
// ranks' samples the model's — the plain cut's slices exactly; with
// balance=bytes §13.3's assignment of the global batch by its samples'
// stored bytes, each rank's repeats separated (§7.2); with locality, the global batch's samples, each rank as
// many as its slice. It returns the global batch's keys, rank by rank,
// and records each rank's read.
func (j *mJob) step(e uint64, m int, cut jobmodel.Cut, pick func(rank int) int) []string {
	j.t.Helper()
	order := j.order(e)
	n := len(order)
	if m >= cut.Batches(n) {
		j.t.Fatalf("epoch %d batch %d (%+v): past the model's %d batches", e, m, cut, cut.Batches(n))
	}
	gs, ge := cut.Global(n, m)
	ranks := make([][]string, cut.World)
	for r := range cut.World {
		node := pick(r)
		path := fmt.Sprintf("/epoch/%d/batch/%d?%s", e, m, j.query(cut, r).Encode())
		resp, body := get(j.t, j.nodes.urls[node]+path)
		if resp.StatusCode != http.StatusOK {
			j.t.Fatalf("node %d %s: %s %s", node, path, resp.Status, body)
		}
		if got := resp.Header.Get(api.HeaderEpochSamples); got != strconv.Itoa(n) {
			j.t.Fatalf("node %d %s: Brand-Epoch-Samples %s; the model's epoch has %d", node, path, got, n)
		}
		if got := resp.Header.Get(api.HeaderEpochBatches); got != strconv.Itoa(cut.Batches(n)) {
			j.t.Fatalf("node %d %s: Brand-Epoch-Batches %s; the model's %d", node, path, got, cut.Batches(n))
		}
		if j.ds == mLines && resp.Header.Get(api.HeaderIndex) != j.q.Get("index") {
			j.t.Fatalf("node %d %s: Brand-Index %s; the job pinned %s", node, path, resp.Header.Get(api.HeaderIndex), j.q.Get("index"))
		}
		for _, s := range readTarSplit(j.t, body) {
			want, ok := j.w.content[s.key]
			got := s.files["jpg"]
			if got == nil {
				got = s.files["txt"]
			}
			if !ok || !bytes.Equal(got, want) {
				j.t.Fatalf("node %d %s: sample %s is not its source's bytes", node, path, s.key)
			}
			ranks[r] = append(ranks[r], s.key)
		}
		j.reads = append(j.reads, mRead{path: path, node: node, etag: resp.Header.Get("ETag"), body: body, assignment: j.assignment()})
	}
	global := order[gs:ge]
	shares := cut.Shares(n, m)
	var want [][]string
	switch j.assignment() {
	case "balance":
		costs := make([]uint64, len(global))
		for i, k := range global {
			costs[i] = uint64(j.w.length(k))
		}
		for _, places := range jobmodel.Assign(costs, shares) {
			var keys []string
			for _, p := range places {
				keys = append(keys, global[p])
			}
			// A mixture's small component can bring two draws of one
			// sample together in a rank's share (docs/shuffle.md §7.2).
			jobmodel.SeparateRepeats(keys)
			want = append(want, keys)
		}
	case "plain":
		for r := range cut.World {
			s, e := cut.Rank(n, m, r)
			want = append(want, order[s:e])
		}
	}
	var all []string
	for r, keys := range ranks {
		if want != nil && !slices.Equal(keys, want[r]) {
			j.t.Fatalf("epoch %d batch %d rank %d (%+v, %s): %v; the model's %v", e, m, r, cut, j.assignment(), keys, want[r])
		}
		if len(keys) != shares[r] {
			j.t.Fatalf("epoch %d batch %d rank %d (%+v, %s): %d samples; its plain share is %d", e, m, r, cut, j.assignment(), len(keys), shares[r])
		}
		all = append(all, keys...)
	}
	if !slices.Equal(slices.Sorted(slices.Values(all)), slices.Sorted(slices.Values(global))) {
		j.t.Fatalf("epoch %d batch %d (%+v, %s): the ranks hold %v; the model's global batch %v", e, m, cut, j.assignment(), all, global)
	}
	if j.model != nil && j.q.Get("job") != "" && (!j.served || e > j.sEpoch || e == j.sEpoch && ge > j.sEnd) {
		j.served, j.sEpoch, j.sEnd = true, e, ge
	}
	return all
}

// epoch reads epoch e whole under cut from batch from on, the ranks from
// nodes pick chooses, and returns its keys in order.
func (j *mJob) epoch(e uint64, from int, cut jobmodel.Cut, pick func(rank int) int) []string {
	j.t.Helper()
	n, _ := j.length(e)
	var keys []string
	for m := from; m < cut.Batches(n); m++ {
		keys = append(keys, j.step(e, m, cut, pick)...)
	}
	return keys
}

// countsAsRuled holds a whole epoch's samples, read from offset 0 without
// drop_last, to the rules of docs/shuffle.md §16 rather than the model's
// order: every sample of the epoch's version once, but those an
// exclusion of an earlier epoch left out (never), and those an exclusion
// of this epoch lists (at most once, and only before its position).
func (j *mJob) countsAsRuled(e uint64, keys []string) {
	j.t.Helper()
	newest := j.w.newest(j.ds)
	before, during := map[int]bool{}, map[int]int{} // during: the first position an exclusion of e leaves it out from
	for _, x := range j.model.Chain {
		for _, id := range x.IDs {
			switch {
			case x.Epoch < e:
				before[id] = true
			case x.Epoch == e:
				if _, ok := during[id]; !ok {
					during[id] = x.Pos
				}
			}
		}
	}
	at := map[int]int{}
	for p, k := range keys {
		id, ok := newest.ids[k]
		if !ok || id >= j.sum(e) {
			j.t.Fatalf("epoch %d: sample %s is not of the epoch's version", e, k)
		}
		if _, twice := at[id]; twice {
			j.t.Fatalf("epoch %d: sample %s served twice", e, k)
		}
		at[id] = p
	}
	for id := range j.sum(e) {
		p, served := at[id]
		from, excluded := during[id]
		switch {
		case before[id] && served:
			j.t.Fatalf("epoch %d: sample %s, excluded in an earlier epoch, served", e, newest.keys[id])
		case !before[id] && !excluded && !served:
			j.t.Fatalf("epoch %d: sample %s of the epoch's version never served", e, newest.keys[id])
		case excluded && served && p >= from:
			j.t.Fatalf("epoch %d: sample %s served at position %d, after its exclusion's %d", e, newest.keys[id], p, from)
		}
	}
	if len(at) != len(keys) {
		j.t.Fatalf("epoch %d: %d samples served, %d distinct", e, len(keys), len(at))
	}
}

// sum is the samples of the version the job reads in epoch e.
func (j *mJob) sum(e uint64) int {
	n := 0
	for _, c := range j.model.Version(e) {
		n += c
	}
	return n
}

// reread reads every recorded batch again from node (its own node if
// node < 0) and holds it to what was read: the same ETag and bytes. A
// batch laid out by locality on a cluster is compared only on a cluster.
func (j *mJob) reread(node int, urls []string, cluster bool) {
	j.t.Helper()
	for _, rd := range j.reads {
		at := node
		if at < 0 {
			at = rd.node
		}
		if !cluster && rd.assignment == "locality" {
			continue
		}
		resp, body := get(j.t, urls[at]+rd.path)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != rd.etag || !bytes.Equal(body, rd.body) {
			j.t.Fatalf("%s read again from node %d: %s, ETag %s (was %s), same bytes %v", rd.path, at, resp.Status, resp.Header.Get("ETag"), rd.etag, bytes.Equal(body, rd.body))
		}
	}
}

// length of a sample, by key: its stored bytes in its dataset's index.
func (w *mWorld) length(key string) int64 {
	for _, vs := range w.versions {
		v := vs[len(vs)-1]
		if id, ok := v.ids[key]; ok {
			return v.length[id]
		}
	}
	return -1
}
