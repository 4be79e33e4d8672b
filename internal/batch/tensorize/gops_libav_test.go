//go:build brand_libav

package tensorize

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/cache/gopcache"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

// TestCachedFramesArePyAVs: clips whose GOPs are decoded once a horizon —
// taken from the decoded-GOP cache, or decoded with every frame the
// horizon's clips not yet served want, disposable frames no clip wants
// left undecoded — are PyAV's decode of the frames they name, byte for
// byte, over every encoding videotest writes (H.264 with and without
// B-frames, long GOPs, variable frame rate, fragmented with and without
// sidx, an open GOP, audio interleaved, QuickTime, H.265 hvc1 and hev1,
// VP9, AV1), with a cache that holds every GOP a horizon wants (each then
// decoded once a horizon, whatever order the batches come in), one that
// holds a few frames, and none; and once every clip is served, the cache
// holds nothing.
func TestCachedFramesArePyAVs(t *testing.T) {
	files := map[string]string{}
	for i, f := range videotest.Fixtures {
		files[fmt.Sprintf("class%d/v%02d%s", i%3, i, f.Name[len(f.Name)-4:])] = f.Name
	}
	dec, data, paths := videoTree(t, 4<<10, files)
	refs := map[string]videotest.Reference{}
	for key, p := range paths {
		refs[key] = videotest.Decode(t, p)
	}
	d := dec.Dataset()
	space, err := clips.New(d, clips.Params{Frames: 6, Stride: 2, Step: 4})
	if err != nil {
		t.Fatal(err)
	}
	n := space.Samples()
	r := rand.New(rand.NewPCG(93, 3))
	order := r.Perm(n)
	// Two horizons, the order's halves.
	var hs []*gopcache.Horizon
	for k, span := range [][2]int{{0, n / 2}, {n / 2, n}} {
		uses := map[clips.GOP][]gopcache.Use{}
		for pos := span[0]; pos < span[1]; pos++ {
			c, err := space.Clip(3, 0, order[pos])
			if err != nil {
				t.Fatal(err)
			}
			for g, pts := range GOPFrames(d, c) {
				uses[g] = append(uses[g], gopcache.Use{Pos: pos, Frames: pts})
			}
		}
		hs = append(hs, &gopcache.Horizon{ID: fmt.Sprint("h", k), Start: span[0], End: span[1],
			Uses: func(v, g int) []gopcache.Use { return uses[clips.GOP{Video: v, GOP: g}] }})
	}
	distinct := 0 // the horizons' GOPs
	for _, h := range hs {
		seen := map[clips.GOP]bool{}
		for pos := h.Start; pos < h.End; pos++ {
			c, _ := space.Clip(3, 0, order[pos])
			for g := range GOPFrames(d, c) {
				seen[g] = true
			}
		}
		distinct += len(seen)
	}
	for _, tc := range []struct {
		name     string
		cache    int64
		shuffled bool
	}{{"a cache that holds a horizon", 1 << 30, false}, {"that cache, batches out of order", 1 << 30, true},
		{"a cache of a few frames", 120 << 10, false}, {"no cache", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := transform.NewSet(transform.Config{}, transform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := New(Config{Pipelines: set, Workers: 2, Buffers: &budget{size: 1 << 30}, Decodes: decodes(1 << 30),
				GOPCache: tc.cache, MaxBytes: 1 << 30, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer s.Close()
			var batches [][]int
			for p := 0; p < n; p += 3 {
				var b []int
				for q := p; q < min(p+3, n); q++ {
					b = append(b, q)
				}
				batches = append(batches, b)
			}
			if tc.shuffled {
				r.Shuffle(len(batches), func(i, j int) { batches[i], batches[j] = batches[j], batches[i] })
			}
			// A fill holds what the batch that decided it could decode: not
			// an open GOP's leading pictures when it read no GOP before. A
			// batch that wants such a picture of a GOP another batch holds
			// decodes its own (Short), however the batches' decisions fall.
			leadings := 0
			for _, b := range batches {
				want := map[gopcache.Key]bool{}
				for _, p := range b {
					c, _ := space.Clip(3, 0, order[p])
					h := hs[0]
					if p >= hs[1].Start {
						h = hs[1]
					}
					for g, pts := range GOPFrames(d, c) {
						alone := Decodable(d, g.Video, func(x clips.GOP) bool { return x == g })
						for _, t := range pts {
							if !alone(t) {
								want[gopcache.Key{Horizon: h.ID, Video: g.Video, GOP: g.GOP}] = true
							}
						}
					}
				}
				leadings += len(want)
			}
			var wg sync.WaitGroup
			work := make(chan []int)
			for range 3 {
				wg.Go(func() {
					for b := range work {
						var ns []int
						for _, p := range b {
							ns = append(ns, order[p])
						}
						req := clipRequest(t, dec, data, space, 0, ns, video.THWC)
						for i, p := range b {
							req.Clips[i].Pos = p
							req.Clips[i].Horizon = hs[0]
							if p >= hs[1].Start {
								req.Clips[i].Horizon = hs[1]
							}
						}
						out, err := s.Clips(context.Background(), req)
						if err != nil {
							t.Errorf("positions %v: %v", b, err)
							return
						}
						for k, m := range clipMembers(t, out) {
							c := req.Clips[k].Clip
							vid := d.Videos[c.Video].Key
							ref := refs[vid]
							arr, err := client.ParseNPY(m["frames.npy"])
							if err != nil {
								t.Error(err)
								return
							}
							size := ref.Width * ref.Height * 3
							for i, f := range c.Frames {
								if got := arr.Data[i*size : (i+1)*size]; string(got) != string(ref.Frames[f.PTS]) {
									t.Errorf("%s (%s), clip %d: frame %d (pts %d) differs from PyAV's", vid, files[vid], c.Sample, i, f.PTS)
								}
							}
						}
						out.Release()
					}
				})
			}
			for _, b := range batches {
				work <- b
			}
			close(work)
			wg.Wait()
			f := s.ClipFigures()
			st := s.frames.Stats()
			t.Logf("%d clips: %d GOPs decoded (the horizons want %d), %d frames decoded, %d left out, %d GOPs and %d frames from the cache; %d batches' GOPs with a leading picture; %+v",
				n, f.GOPs, distinct, f.Decoded, f.Disposable, f.Hits, f.Cached, leadings, st)
			if st.Held != 0 || st.Entries != 0 {
				t.Errorf("after every clip: the cache holds %d bytes, %d GOPs", st.Held, st.Entries)
			}
			if tc.cache == 1<<30 {
				// Each GOP once a horizon, whatever batches run at once,
				// but for an open GOP's leading frames its first batch
				// could not decode (it read no GOP before it), decoded for
				// the batches that want them.
				if fills := st.Kept + st.Alone - st.Short; fills != int64(distinct) || st.Short > int64(leadings) {
					t.Errorf("%d fills (%d short) for the %d GOPs the horizons want", fills, st.Short, distinct)
				}
			}
			if tc.cache == 0 && f.Hits != 0 {
				t.Errorf("%d GOPs from no cache", f.Hits)
			}
		})
	}
}
