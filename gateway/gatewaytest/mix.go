package gatewaytest

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
)

// MixWeights is the mixture of a Mix's three datasets the tests ask for.
const MixWeights = "web:0.5,code:0.3,books:0.2"

// Mix is three datasets of different sizes, the smallest smaller than
// its share of a mixture epoch: web (12 chunks of 25 samples), code
// (6 of 20) and books (2 of 10), each sample's key starting with its
// dataset's name.
type Mix struct {
	Sets  map[string]*Fixture
	Names []string
	Specs []gateway.DatasetSpec
}

// NewMix packs a Mix.
func NewMix(t testing.TB) *Mix {
	t.Helper()
	m := &Mix{Sets: map[string]*Fixture{}, Names: []string{"web", "code", "books"}}
	for _, d := range []struct {
		name             string
		chunks, perChunk int
	}{{"web", 12, 25}, {"code", 6, 20}, {"books", 2, 10}} {
		f := NewFixtureNamed(t, t.TempDir(), d.name+"-", d.chunks, d.perChunk, 0)
		m.Sets[d.name] = f
		m.Specs = append(m.Specs, gateway.DatasetSpec{Name: d.name, URL: "file:///" + d.name, Store: f.Store})
	}
	return m
}

// Start serves the mix's datasets at batch size 8, window 2, seed 5
// and returns the server's URL.
func (m *Mix) Start(t testing.TB) string {
	t.Helper()
	_, srv := Start(t, nil, func(c *gateway.Config) {
		c.Datasets = m.Specs
		c.Defaults = gateway.Defaults{BatchSize: 8, Window: 2, Seed: 5}
	})
	return srv.URL
}

// MixSample is a served sample of a mixture: its component and key.
type MixSample struct {
	Comp int
	Key  string
}

// Read reads one batch of a mixture, checks its bytes against the
// component datasets' sources and returns its samples and body hash.
func (m *Mix) Read(t testing.TB, url string) ([]MixSample, [32]byte) {
	t.Helper()
	resp, body := Get(t, url)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
	}
	samples := ReadTarSplit(t, body)
	hdr := resp.Header.Get(api.HeaderMixComponents)
	var comps []string
	if hdr != "" {
		comps = strings.Split(hdr, ",")
	}
	if len(comps) != len(samples) {
		t.Fatalf("%s: %d components for %d samples", url, len(comps), len(samples))
	}
	out := make([]MixSample, len(samples))
	for i, s := range samples {
		c, err := strconv.Atoi(comps[i])
		if err != nil || c < 0 || c >= len(m.Names) {
			t.Fatalf("component %q", comps[i])
		}
		f := m.Sets[m.Names[c]]
		if !strings.HasPrefix(s.Key, m.Names[c]+"-") {
			t.Fatalf("sample %s tagged as component %d (%s)", s.Key, c, m.Names[c])
		}
		for ext, want := range f.Content[s.Key] {
			if !bytes.Equal(s.Files[ext], want) {
				t.Fatalf("sample %s.%s differs from its source", s.Key, ext)
			}
		}
		out[i] = MixSample{c, s.Key}
	}
	return out, sha256.Sum256(body)
}
