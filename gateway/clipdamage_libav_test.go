//go:build brand_libav

package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
)

// clipJSON is a tree's clip's .json member.
type clipJSON struct {
	Video  string
	Frames []int
	PTS    []int64
}

// clipBatches gets every batch of epoch 0 of the clip job q.
func clipBatches(t *testing.T, url, q string) (resps []*http.Response, bodies [][]byte) {
	t.Helper()
	var info struct{ Batches int }
	if resp, body := get(t, url+"/epoch/0?"+q); resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
		t.Fatalf("the epoch: %d %s", resp.StatusCode, body)
	}
	for m := range info.Batches {
		resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", url, m, q))
		resps, bodies = append(resps, resp), append(bodies, body)
	}
	return resps, bodies
}

// clipsOf returns the keys of a batch's clips whose first frame is in
// [from, to).
func clipsOf(t *testing.T, body []byte, from, to int) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, s := range readTar(t, body) {
		var js clipJSON
		if err := json.Unmarshal(s.files["json"], &js); err != nil {
			t.Fatal(err)
		}
		if js.Frames[0] >= from && js.Frames[0] < to {
			out[s.key] = true
		}
	}
	return out
}

// On a cluster, a damaged GOP's chunk is owned by one node and its clips
// are asked for on another: the owner leaves the GOP's sample out of its
// answer, and the asker fails the batches whose clips need it (502
// naming the GOP's sample) and serves every other batch exactly, or with
// skip serves them without those clips, counted in Brand-Missing-Samples.
// What a single node's stages make of a damaged GOP, or of a lost or
// undecodable video, is internal/batch/visit's (TestClipOfADamagedPacket,
// TestDamagedGOPFailsOnlyItsClips, TestClipOfALostVideo).
func TestDamagedGOPOnACluster(t *testing.T) {
	dv := stagetest.NewDamagedVideo(t, 2, 5, "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "25", "-crf", "8")
	opts := dataset.InPlaceOptions{Options: format.Options{ChunkBytes: 256 << 10}} // chunks of 2 or 3 GOPs
	const q = "clip=4&step=4&clip_start=first&batch_size=2"
	_, intact := clipBatches(t, startVideos(t, dv.Store(t, opts, false), nil).URL, q)
	damaged := make([]map[string]bool, len(intact))
	n := 0
	for k, body := range intact {
		damaged[k] = clipsOf(t, body, 47, 75) // GOP 2: frames 50..74
		if len(damaged[k]) > 0 {
			n++
		}
	}
	if n == 0 || n == len(intact) {
		t.Fatalf("%d of %d batches hold the damaged GOP's clips", n, len(intact))
	}
	st := dv.Store(t, opts, true)
	for _, skip := range []bool{false, true} {
		cl := startCluster(t, &fixture{store: st}, 2, nil, func(c *gateway.Config) {
			c.Datasets[0].Formats = []format.Format{video.Format{}}
			if skip {
				c.OnDamagedChunk = gateway.OnDamagedSkip
			}
		})
		for _, node := range cl {
			resps, bodies := clipBatches(t, node.srv.URL, q)
			for k := range intact {
				code := resps[k].StatusCode
				switch {
				case len(damaged[k]) == 0:
					if code != http.StatusOK || !bytes.Equal(bodies[k], intact[k]) {
						t.Errorf("skip %t, node %s, batch %d (no clip of the damaged GOP): %d %.200s; want the intact file's", skip, node.srv.URL, k, code, bodies[k])
					}
				case !skip:
					if code != http.StatusBadGateway || !strings.Contains(string(bodies[k]), "cls/x/000002") {
						t.Errorf("node %s, batch %d of the damaged GOP: %d %.300s; want 502 naming its sample cls/x/000002", node.srv.URL, k, code, bodies[k])
					}
				default:
					if code != http.StatusOK || len(readTar(t, bodies[k])) != len(readTar(t, intact[k]))-len(damaged[k]) ||
						resps[k].Header.Get(api.HeaderMissingSamples) != strconv.Itoa(len(damaged[k])) {
						t.Errorf("skip, node %s, batch %d: %d %.200s; want it without the damaged GOP's %d clips", node.srv.URL, k, code, bodies[k], len(damaged[k]))
					}
				}
			}
		}
	}
}
