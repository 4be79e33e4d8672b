package gateway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// mixFixture is three datasets of different sizes, the smallest smaller
// than its share of a mixture epoch.
type mixFixture struct {
	sets  map[string]*fixture
	names []string
	specs []gateway.DatasetSpec
}

func newMixFixture(t *testing.T) *mixFixture {
	t.Helper()
	m := &mixFixture{sets: map[string]*fixture{}, names: []string{"web", "code", "books"}}
	for _, d := range []struct {
		name             string
		chunks, perChunk int
	}{{"web", 12, 25}, {"code", 6, 20}, {"books", 2, 10}} {
		f := newFixtureNamed(t, t.TempDir(), d.name+"-", d.chunks, d.perChunk, 0)
		m.sets[d.name] = f
		m.specs = append(m.specs, gateway.DatasetSpec{Name: d.name, URL: "file:///" + d.name, Store: f.store})
	}
	return m
}

// start serves the fixture's datasets at batch size 8, window 2, seed 5
// and returns the server's URL.
func (m *mixFixture) start(t *testing.T) string {
	t.Helper()
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = m.specs
		c.Defaults = gateway.Defaults{BatchSize: 8, Window: 2, Seed: 5}
	})
	return srv.URL
}

// mixSample is a served sample of a mixture: its component and key.
type mixSample struct {
	comp int
	key  string
}

// readMix reads one batch of a mixture, checks its bytes against the
// component datasets' sources and returns its samples and body hash.
func (m *mixFixture) readMix(t *testing.T, url string) ([]mixSample, [32]byte) {
	t.Helper()
	resp, body := get(t, url)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
	}
	samples := readTarSplit(t, body)
	hdr := resp.Header.Get(api.HeaderMixComponents)
	var comps []string
	if hdr != "" {
		comps = strings.Split(hdr, ",")
	}
	if len(comps) != len(samples) {
		t.Fatalf("%s: %d components for %d samples", url, len(comps), len(samples))
	}
	out := make([]mixSample, len(samples))
	for i, s := range samples {
		c, err := strconv.Atoi(comps[i])
		if err != nil || c < 0 || c >= len(m.names) {
			t.Fatalf("component %q", comps[i])
		}
		f := m.sets[m.names[c]]
		if !strings.HasPrefix(s.key, m.names[c]+"-") {
			t.Fatalf("sample %s tagged as component %d (%s)", s.key, c, m.names[c])
		}
		for ext, want := range f.content[s.key] {
			if !bytes.Equal(s.files[ext], want) {
				t.Fatalf("sample %s.%s differs from its source", s.key, ext)
			}
		}
		out[i] = mixSample{c, s.key}
	}
	return out, sha256.Sum256(body)
}

const testMix = "web:0.5,code:0.3,books:0.2"

// TestMixtureOverHTTP is the mixture's HTTP contract with three datasets
// of 300, 120 and 20 samples at weights 0.5, 0.3, 0.2, batch 8 × world 4:
// /epoch describes the mixture (its components, block and length), each
// batch's Brand-Mix-Components header names each sample's component, the
// bytes are the sources', and /stats and /metrics count each component's
// samples. What the batches hold — weights, passes, resuming at another
// world size — is internal/batch/layout's TestMixtureContract and
// TestMixtureResumeAtAnotherWorldSize.
func TestMixtureOverHTTP(t *testing.T) {
	m := newMixFixture(t)
	base := m.start(t)
	const world = 4
	resp, body := get(t, fmt.Sprintf("%s/epoch/0?mix=%s&world=%d", base, testMix, world))
	var e0 api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &e0) != nil {
		t.Fatalf("epoch info: %d %s", resp.StatusCode, body)
	}
	if e0.Samples != 448 || e0.Batches != 14 || e0.Mix == nil || e0.Mix.Block != 32 || len(e0.Mix.Components) != 3 {
		t.Fatalf("epoch info %+v", e0)
	}
	served := make([]int, 3)
	for b := range e0.Batches {
		for r := range world {
			got, _ := m.readMix(t, fmt.Sprintf("%s/epoch/0/batch/%d?mix=%s&world=%d&rank=%d", base, b, testMix, world, r))
			if len(got) != 8 {
				t.Fatalf("batch %d rank %d: %d samples", b, r, len(got))
			}
			for _, s := range got {
				served[s.comp]++
			}
		}
	}

	// /stats and /metrics count each component.
	resp, body = get(t, base+"/stats")
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
	var st struct {
		Mixtures []api.MixStat `json:"mixtures"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Mixtures) != 1 || st.Mixtures[0].Mix != testMix {
		t.Fatalf("stats mixtures %+v", st.Mixtures)
	}
	for i, c := range st.Mixtures[0].Components {
		if c.Dataset != m.names[i] || c.Samples != int64(served[i]) || c.BackendBytes <= 0 {
			t.Fatalf("stats component %d: %+v (served %d)", i, c, served[i])
		}
	}
	_, metrics := get(t, base+"/metrics")
	for i, name := range m.names {
		if !strings.Contains(string(metrics), fmt.Sprintf(`brand_mix_samples_total{dataset=%q} %d`, name, served[i])) {
			t.Fatalf("metrics lack %s's mixture samples", name)
		}
	}
}

// TestMixtureErrors: malformed mixtures and schedules, and parameters
// that do not apply, are refused with the status that says why (and a
// dataset not served named); the words of each refusal are api's
// TestParseMix and TestParseScheduleSaysWhy and internal/job/query's TestParse.
func TestMixtureErrors(t *testing.T) {
	m := newMixFixture(t)
	base := m.start(t)
	for _, tc := range []struct {
		query  string
		status int
		says   string
	}{
		{"mix=web:0.5,nope:0.5", http.StatusNotFound, "nope"},
		{"mix=web:0.5,web:0.5", http.StatusBadRequest, ""},
		{"mix=web:x", http.StatusBadRequest, ""},
		{"mix=web:1&dataset=web", http.StatusBadRequest, ""},
		{"mix_block=8", http.StatusBadRequest, ""},
		{"mix=web:1&sampling=importance&job=j", http.StatusBadRequest, ""},
		{"mix=web:1,code:1&mix_block=0", http.StatusBadRequest, ""},
		{"mix=web:1,code:1.100001&mix_block=1&mix_samples=4194304", http.StatusBadRequest, ""}, // past shuffle.MaxMixWork: internal/batch/layout's TestMixtureRequestsBounded
		{"mix_schedule=" + url.QueryEscape("0:web:1;9:web:2;4:web:1"), http.StatusBadRequest, "increasing step order"},
		{"mix_schedule=" + url.QueryEscape("0:web:1,nope:1"), http.StatusNotFound, "nope"},
		{"mix_schedule=0:web:1&mix=web:1", http.StatusBadRequest, "a job reads one source"},
	} {
		resp, body := get(t, base+"/epoch/0/batch/0?"+tc.query)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("?%s: %d %.200s; want %d saying %q", tc.query, resp.StatusCode, body, tc.status, tc.says)
		}
	}
	resp, body := get(t, base+"/epoch/0/batch/14?mix="+testMix+"&world=4")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("batch past the end: %d %s", resp.StatusCode, body)
	}
	// A manifest names each sample's dataset.
	resp, body = get(t, base+"/epoch/0/batch/0/manifest?mix="+testMix)
	var man api.Manifest
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &man) != nil || len(man.Samples) != 8 {
		t.Fatalf("manifest: %d %s", resp.StatusCode, body)
	}
	for _, s := range man.Samples {
		if !strings.HasPrefix(s.Key, s.Dataset+"-") {
			t.Fatalf("manifest sample %+v", s)
		}
	}
	// HEAD knows the length without reading.
	resp, _ = do(t, http.MethodHead, base+"/epoch/0/batch/0?mix="+testMix, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderMixBlock) != "8" || resp.ContentLength != man.Bytes {
		t.Fatalf("HEAD: %d block %q length %d (manifest %d)", resp.StatusCode, resp.Header.Get(api.HeaderMixBlock), resp.ContentLength, man.Bytes)
	}
	etag := resp.Header.Get("ETag")
	resp, _ = get(t, base+"/epoch/0/batch/0?mix="+testMix, "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", resp.StatusCode)
	}
}

// TestClusterSchedule: a schedule whose weights change at step 4, on a
// cluster of three nodes: every rank reads its home, peers are asked with
// the schedule, each chunk of each component is read from the store by
// one node once, and any node answers any rank's request with the same
// bytes. (A mixture's on two `brand serve` processes is integration's
// TestMixtureClusterOnMinIO; how a mixture's or a schedule's samples are
// assigned to ranks by locality, internal/batch/layout's TestMixtureLocality.)
func TestClusterSchedule(t *testing.T) {
	m := newMixFixture(t)
	const nodes, world, batch = 3, 6, 8
	stores := make([]map[string]*s3test.Store, nodes) // each node's, by dataset
	cl := startCluster(t, m.sets["web"], nodes, nil, func(c *gateway.Config) {
		k := c.Cluster.Self
		stores[k] = map[string]*s3test.Store{}
		c.Datasets = slices.Clone(m.specs)
		for i, spec := range c.Datasets {
			stores[k][spec.Name] = s3test.Wrap(spec.Store)
			c.Datasets[i].Store = stores[k][spec.Name]
		}
		c.Defaults = gateway.Defaults{BatchSize: batch, Window: 2, Seed: 5}
	})
	srvs := make([]string, nodes)
	for k, n := range cl {
		srvs[k] = n.srv.URL
	}
	q := func(r int) string {
		return fmt.Sprintf("mix_schedule=%s&window=6&world=%d&rank=%d",
			url.QueryEscape("0:"+testMix+";4:web:0.2,code:0.2,books:0.6"), world, r)
	}
	const batches = 10 // K = 48: 440 samples rounded up to 480, ten global batches
	bodies := map[string][32]byte{}
	for r := range world {
		for b := range batches {
			_, sum := m.readMix(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srvs[cluster.Home(r, world, nodes)], b, q(r)))
			bodies[fmt.Sprintf("%d/%d", r, b)] = sum
		}
	}
	for _, name := range m.names {
		reads := map[string]int{}
		for k := range nodes {
			for obj, c := range stores[k][name].Take().Under("chunks/") {
				if c.Reads > 0 {
					reads[obj] += c.Reads
				}
			}
		}
		for obj, n := range reads {
			if n != 1 {
				t.Errorf("%s: chunk %s read %d times by the cluster", name, obj, n)
			}
		}
	}
	for _, r := range []int{0, 5} {
		for k, u := range srvs {
			if _, sum := m.readMix(t, fmt.Sprintf("%s/epoch/0/batch/2?%s", u, q(r))); sum != bodies[fmt.Sprintf("%d/2", r)] {
				t.Fatalf("rank %d batch 2 from node %d differs from its home's", r, k)
			}
		}
	}
}
