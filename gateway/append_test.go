package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// appendLines adds data/f9.lines (20 lines) beside an inPlaceStore's
// files and appends it to the dataset (brand index --append).
func appendLines(t *testing.T, st s3backend.Store) {
	t.Helper()
	var lines []string
	for l := range 20 {
		lines = append(lines, fmt.Sprintf("added line %d", l))
	}
	for k, b := range formattest.Write(map[string][]string{"data/f9.lines": lines}) {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.AppendInPlace(context.Background(), st, st, dataset.AppendOptions{
		Formats: []format.Format{formattest.Lines{}}, Options: format.Options{ChunkBytes: 300}}); err != nil {
		t.Fatal(err)
	}
}

// A job pinned to an index version (index=V) is served V's order by a
// gateway that holds only a version extending V (files appended since,
// the gateway started after): the same batches, byte for byte, under the
// same ETags, and /epoch/N describes V — where it was a 409 before.
// Unpinned requests read the extended version.
func TestPinnedVersionAfterAppend(t *testing.T) {
	st, want := inPlaceStore(t, formattest.Lines{})
	_, before := start(t, st, func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} })
	const q = "seed=7&window=4&batch_size=8&world=2&rank=1"
	resp, _ := get(t, before.URL+"/epoch/0/batch/0?"+q)
	v := resp.Header.Get("Brand-Index")
	type read struct {
		etag string
		body []byte
	}
	var old []read
	batches := len(want) / 16
	for epoch := range 2 {
		for m := range batches {
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&index=%s", before.URL, epoch, m, q, v))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("epoch %d batch %d: %s %s", epoch, m, resp.Status, body)
			}
			old = append(old, read{resp.Header.Get("ETag"), body})
		}
	}

	appendLines(t, st)
	_, after := start(t, st, func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} })
	i := 0
	for epoch := range 2 {
		for m := range batches {
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&index=%s", after.URL, epoch, m, q, v))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("pinned to %s after the append: epoch %d batch %d: %s %s", v, epoch, m, resp.Status, body)
			}
			if got := resp.Header.Get("ETag"); got != old[i].etag || !bytes.Equal(body, old[i].body) || resp.Header.Get("Brand-Index") != v {
				t.Fatalf("epoch %d batch %d: ETag %s, index %s (want %s, %s), same bytes %v", epoch, m, got, resp.Header.Get("Brand-Index"), old[i].etag, v, bytes.Equal(body, old[i].body))
			}
			i++
		}
	}
	var ep struct {
		Index   string `json:"index"`
		Samples int    `json:"samples"`
	}
	resp, body := get(t, after.URL+"/epoch/0?"+q+"&index="+v)
	if err := json.Unmarshal(body, &ep); err != nil || resp.StatusCode != http.StatusOK || ep.Index != v || ep.Samples != len(want) {
		t.Fatalf("/epoch/0 pinned: %s %s", resp.Status, body)
	}
	resp, body = get(t, after.URL+"/epoch/0?"+q)
	if err := json.Unmarshal(body, &ep); err != nil || ep.Index == v || ep.Samples != len(want)+20 {
		t.Fatalf("/epoch/0 unpinned: %s %s", resp.Status, body)
	}
}
