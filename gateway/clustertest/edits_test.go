package clustertest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

// TestOldVersionOnAClusterAfterAppend: a cluster node holds its
// dataset's index in part and reads the sample tables of chunks it does
// not keep from the stored index object when a batch needs them. An
// append replaces that object; a job pinned to the version before it
// (index=) goes on reading that version on every node, each batch the
// bytes and ETag it had before the append, with a table cache too small
// to keep any table read (every read goes to the object), and a job
// pinned to it takes an exclusion of its keys. Both answered 502 while
// the nodes read the old version's tables from the replaced object.
func TestOldVersionOnAClusterAfterAppend(t *testing.T) {
	st, _ := gatewaytest.InPlaceStore(t, formattest.Lines{})
	nodes := gatewaytest.StartCluster(t, st, 3, nil, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{formattest.Lines{}}
		c.IndexTablesCache = 1
	})
	const shape = "dataset=test&seed=7&window=4&batch_size=5&world=2"
	v := gatewaytest.Dataset(t, nodes[0].Srv.URL).IndexID
	type read struct {
		etag string
		body []byte
	}
	readAll := func() map[string]read {
		t.Helper()
		out := map[string]read{}
		for k, n := range nodes {
			for m := range 12 {
				for r := range 2 {
					resp, body := gatewaytest.Get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&rank=%d&index=%s", n.Srv.URL, m, shape, r, v))
					if resp.StatusCode != http.StatusOK || resp.Header.Get("Brand-Index") != v {
						t.Fatalf("node %d step %d rank %d of version %s: %s, index %s: %s", k, m, r, v, resp.Status, resp.Header.Get("Brand-Index"), body)
					}
					out[fmt.Sprintf("%d/%d/%d", k, m, r)] = read{resp.Header.Get("ETag"), body}
				}
			}
		}
		return out
	}
	before := readAll()
	gatewaytest.AppendFile(t, st, "g0")
	for _, n := range nodes {
		if _, err := n.G.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if cur := gatewaytest.Dataset(t, nodes[0].Srv.URL).IndexID; cur == v {
		t.Fatalf("the nodes still serve %s after the append", v)
	}
	for key, got := range readAll() {
		if want := before[key]; got.etag != want.etag || !bytes.Equal(got.body, want.body) {
			t.Fatalf("node/step/rank %s of version %s: other bytes after the append (ETag %s, before %s)", key, v, got.etag, want.etag)
		}
	}
	resp, body := gatewaytest.Do(t, http.MethodPost, fmt.Sprintf("%s/jobs/old/exclude?%s&index=%s", nodes[1].Srv.URL, shape, v),
		[]byte(`{"from_step": 3, "keys": ["data/f0/1", "data/f2/7"]}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("an exclusion of a job pinned to %s after the append: %s %s", v, resp.Status, body)
	}
}
