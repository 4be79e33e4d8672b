package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

// repack overwrites f's store with another dataset, as `brand pack
// --overwrite` would, and returns the new one (whose content to check
// against).
func repack(t *testing.T, f *fixture, chunks, perChunk int) *fixture {
	t.Helper()
	return newFixtureNamed(t, f.dir, "", chunks, perChunk, 0)
}

// datasets is gatewaytest.Dataset.
func datasets(t *testing.T, base string) api.DatasetInfo {
	t.Helper()
	return gatewaytest.Dataset(t, base)
}

// TestReloadIndex: a dataset re-packed under a running gateway is served
// from its new index after Gateway.Reload, with new batch ETags, the new
// index in Brand-Index, the new version in /datasets and the metrics.
// (When the catalog looks — asked, polled or poked — and what it keeps:
// internal/job/catalog's TestReload.)
func TestReloadIndex(t *testing.T) {
	f := newFixture(t, 4, 3)
	g, srv := start(t, f.store, func(c *gateway.Config) {
		c.Defaults.Window, c.Defaults.BatchSize = 2, 6
		c.IndexPoll = -1
	})
	url := srv.URL + "/epoch/0/batch/0"
	old, _ := get(t, url)
	before := datasets(t, srv.URL)
	if before.IndexVersion != 1 || before.IndexETag == "" {
		t.Fatalf("/datasets before a reload: %+v", before)
	}
	nf := repack(t, f, 3, 5)
	if got, err := g.Reload(context.Background()); err != nil || !slices.Equal(got, []string{"test"}) {
		t.Fatalf("Reload = %v, %v; want [test]", got, err)
	}
	after := datasets(t, srv.URL)
	if after.IndexVersion != 2 || after.IndexID != nf.index.ID() || after.IndexETag == before.IndexETag {
		t.Fatalf("/datasets after a reload: %+v (before %+v)", after, before)
	}
	resp, body := get(t, url)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after the reload: %s: %s", resp.Status, body)
	}
	if resp.Header.Get("ETag") == old.Header.Get("ETag") {
		t.Error("the new version's batch has the old ETag")
	}
	if resp.Header.Get(api.HeaderIndex) != nf.index.ID() {
		t.Errorf("served from index %s, want %s", resp.Header.Get(api.HeaderIndex), nf.index.ID())
	}
	samples := readTar(t, body)
	if len(samples) != 6 {
		t.Fatalf("%d samples", len(samples))
	}
	for _, s := range samples {
		if string(s.files["jpg"]) != string(nf.content[s.key]["jpg"]) {
			t.Fatalf("sample %s: not the new version's bytes", s.key)
		}
	}
	if got := metric(t, srv.URL, `brand_index_reloads_total{dataset="test"}`); got != 1 {
		t.Errorf("brand_index_reloads_total = %v, want 1", got)
	}
}
