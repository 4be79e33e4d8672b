//go:build brand_libav

package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// TestModelClipBuckets draws clip bucket jobs — buckets from a pool of
// five aspect ratios at 4, 8 and 16 frames, a budget, a stride, a rate,
// a window, an upscale limit, a world size — over 64 videos ffmpeg writes, and
// holds each to jobmodel.BucketJob, written from the docs: every step's
// bucket and every rank's videos over an epoch, the rest of it resumed at
// another world size after a drawn number of steps, and /plan's
// per-bucket figures, equal to what the epoch serves; a cluster of three
// serves every batch's bytes as the one gateway does. The model's facts
// are the videos as written (sizes, frames), its base order the clip
// job's of one clip a video: each video one chunk, a unit of one sample
// when it holds the shortest bucket's clip.
func TestModelClipBuckets(t *testing.T) {
	const n = 64
	// Sizes of five aspect ratios, one upscaled and one too small; 5 to
	// 40 frames.
	spec := func(i int) (key string, w, h, f int) {
		sizes := [][2]int{{64, 36}, {36, 64}, {48, 48}, {40, 30}, {80, 30}, {20, 12}, {12, 8}}
		s := sizes[i%len(sizes)]
		return fmt.Sprintf("c%d/v%03d.mp4", i%3, i), s[0], s[1], 5 + (i*7)%36
	}
	paths := videotest.Sized(t, t.TempDir(), n, spec)
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for key, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	formats := func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{video.Format{}} }
	_, srv := start(t, st, formats)
	cl := startCluster(t, &fixture{store: st}, 3, nil, formats)
	type vid struct {
		key     string
		w, h, f int
	}
	var vids []vid
	for i := range n {
		key, w, h, f := spec(i)
		vids = append(vids, vid{key, w, h, f})
	}
	sort.Slice(vids, func(a, b int) bool { return vids[a].key < vids[b].key }) // the index's order
	var pool [][3]int
	for _, t := range []int{4, 8, 16} {
		for _, hw := range [][2]int{{18, 32}, {32, 18}, {24, 24}, {16, 36}, {36, 16}} {
			pool = append(pool, [3]int{hw[0], hw[1], t})
		}
	}
	for round := range 8 {
		r := roundRand(uint64(round) + 77)
		p := slices.Clone(pool)
		r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		shapes := p[:2+r.IntN(6)]
		budget := 576 * 16 * (1 + r.IntN(2))
		stride := 1 + r.IntN(2)
		m := &jobmodel.BucketJob{MaxUpscale: 2, Stride: stride}
		names := make([]string, len(shapes))
		tmin := shapes[0][2]
		for i, s := range shapes {
			names[i] = fmt.Sprintf("%dx%dx%d", s[0], s[1], s[2])
			m.Shapes = append(m.Shapes, [2]int{s[0], s[1]})
			m.T = append(m.T, s[2])
			m.Per = append(m.Per, budget/(s[0]*s[1]*s[2]))
			tmin = min(tmin, s[2])
		}
		// The base order's samples: the videos holding the shortest
		// bucket's clip, one each, numbered in order; each video a unit.
		// With fps=5, a video of f frames at 10 fps is resampled to
		// ⌊(f−1)/2⌋+1 (docs/http-api.md, "Video clips").
		fps := r.IntN(3) == 0
		counts := make([]int, n)
		var keys []string
		for v, x := range vids {
			f := x.f
			if fps {
				f = (f-1)/2 + 1
			}
			if (tmin-1)*stride+1 <= f {
				counts[v] = 1
				keys = append(keys, x.key)
				m.Sizes = append(m.Sizes, [2]int{x.w, x.h})
				m.Frames = append(m.Frames, f)
			}
		}
		q := url.Values{}
		if fps {
			q.Set("fps", "5")
		}
		seed := r.Uint64() >> 1
		window := 1 + r.IntN(4)
		q.Set("seed", strconv.FormatUint(seed, 10))
		q.Set("window", strconv.Itoa(window))
		q.Set("buckets", strings.Join(names, ","))
		q.Set("budget", strconv.Itoa(budget))
		q.Set("stride", strconv.Itoa(stride))
		if r.IntN(2) == 0 {
			q.Set("max_upscale", "3")
			m.MaxUpscale = 3
		}
		m.Job = &jobmodel.Job{Counts: counts, Seed: seed, Window: window}
		world := 1 + r.IntN(4)
		t.Logf("round %d: %s, world %d", round, q.Encode(), world)
		check := func(epoch uint64, legs [][2]int, world int) []jobmodel.BucketStep {
			t.Helper()
			want, err := m.Steps(epoch, legs, world)
			if err != nil {
				t.Fatal(err)
			}
			jq := cloneValues(q)
			jq.Set("world", strconv.Itoa(world))
			if len(legs) > 0 {
				jq.Set("resume", fmt.Sprintf("%d:%d", legs[0][0], legs[0][1]))
			}
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s", srv.URL, epoch, jq.Encode()))
			var info api.EpochInfo
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Buckets == nil || info.Batches != len(want) {
				t.Fatalf("/epoch/%d?%s: %s %s; the model's steps %d", epoch, jq.Encode(), resp.Status, body, len(want))
			}
			for step, st := range want {
				for rank := range world {
					jq.Set("rank", strconv.Itoa(rank))
					resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", srv.URL, epoch, step, jq.Encode()))
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("epoch %d step %d rank %d: %s %s", epoch, step, rank, resp.Status, body)
					}
					// A cluster of three serves the same bytes.
					node := cl[r.IntN(len(cl))].srv.URL
					cresp, cbody := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", node, epoch, step, jq.Encode()))
					if cresp.StatusCode != http.StatusOK || !bytes.Equal(cbody, body) || cresp.Header.Get("ETag") != resp.Header.Get("ETag") ||
						cresp.Header.Get(api.HeaderBucketGeometry) != resp.Header.Get(api.HeaderBucketGeometry) {
						t.Fatalf("epoch %d step %d rank %d: a cluster's node answers %s, %d bytes, not the gateway's %d", epoch, step, rank, cresp.Status, len(cbody), len(body))
					}
					if got := resp.Header.Get(api.HeaderTransform); got != "bucket:"+fmt.Sprintf("%dx%d", shapes[st.Bucket][0], shapes[st.Bucket][1]) {
						t.Fatalf("epoch %d step %d rank %d: %s, the model's bucket %s", epoch, step, rank, got, names[st.Bucket])
					}
					var got, wantKeys []string
					for _, s := range readTar(t, body) {
						var js struct{ Video string }
						if err := json.Unmarshal(s.files["json"], &js); err != nil {
							t.Fatal(err)
						}
						if h, _, err := npy.Read(s.files["frames.npy"]); err != nil || h.Shape[0] != int64(shapes[st.Bucket][2]) {
							t.Fatalf("epoch %d step %d: a clip of %v frames in bucket %s (%v)", epoch, step, h.Shape, names[st.Bucket], err)
						}
						got = append(got, js.Video)
					}
					for _, id := range st.Ranks[rank] {
						wantKeys = append(wantKeys, keys[id])
					}
					if !slices.Equal(got, wantKeys) {
						t.Fatalf("epoch %d step %d rank %d (legs %v, world %d): videos %v, the model's %v", epoch, step, rank, legs, world, got, wantKeys)
					}
				}
			}
			return want
		}
		served := check(0, nil, world)
		check(0, [][2]int{{world, r.IntN(len(served) + 1)}}, 1+r.IntN(4))
		jq := cloneValues(q)
		jq.Set("world", strconv.Itoa(world))
		jq.Set("epochs", "2")
		resp, body := get(t, srv.URL+"/plan?"+jq.Encode())
		var plan struct {
			Buckets []api.BucketPlanEpoch `json:"buckets"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &plan) != nil || len(plan.Buckets) != 2 {
			t.Fatalf("/plan?%s: %s %s", jq.Encode(), resp.Status, body)
		}
		counted := make([]int, len(shapes))
		for _, st := range served {
			counted[st.Bucket]++
		}
		for k, b := range plan.Buckets[0].Buckets {
			if b.Batches != counted[k] || b.BatchSize != m.Per[k] {
				t.Fatalf("/plan, bucket %s: %d steps of %d; served %d of %d", b.Shape, b.Batches, b.BatchSize, counted[k], m.Per[k])
			}
		}
	}
}
