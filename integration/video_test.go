//go:build brand_libav

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// The videos of the tests, by key in the source bucket (their folders
// their classes): ffmpeg's (videotest.Fixtures) H.264 without and with
// B-frames (moov first), a keyframe every ten seconds, a variable frame
// rate, fragmented, H.265, VP9.
var videoKeys = map[string]string{
	"walk/a.mp4": "h264.mp4", "walk/b.mp4": "h264-bframes.mp4", "run/c.mp4": "h264-gop10s.mp4",
	"run/d.mp4": "h264-vfr.mp4", "run/e.mp4": "h264-frag.mp4", "jump/f.mp4": "hevc.mp4", "jump/g.mp4": "vp9.mp4",
}

// sourceVideo is one test video: PyAV's frames and the MP4 index's GOPs.
type sourceVideo struct {
	ref   videotest.Reference
	track mp4.Track
	gops  map[int64][]int // a frame's pts -> the GOPs decoding it needs
}

// servedClip is what a test keeps of a clip served: its frames' digest
// and the GOPs they need.
type servedClip struct {
	digest [32]byte
	gops   []string // "video#gop"
}

// clipReader reads a clip job's batches over HTTP and checks every frame
// against PyAV's.
type clipReader struct {
	t      *testing.T
	hc     *http.Client
	job    string // the clip job's query
	videos map[string]*sourceVideo
	frames int
}

// step reads global step m of epoch epoch: its world ranks at their
// homes among urls, each batch_size global/world, from offset. It
// returns the clips in rank order by key.
func (r *clipReader) step(urls []string, epoch, m, world, global, offset int) ([]string, map[string]servedClip) {
	r.t.Helper()
	var keys []string
	out := map[string]servedClip{}
	for rank := range world {
		u := fmt.Sprintf("%s/epoch/%d/batch/%d?%s&batch_size=%d&world=%d&rank=%d&offset=%d",
			urls[cluster.Home(rank, world, len(urls))], epoch, m, r.job, global/world, world, rank, offset)
		resp, err := r.hc.Get(u)
		if err != nil {
			r.t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			r.t.Fatalf("GET %s: %s %v %s", u, resp.Status, err, body)
		}
		samples, err := client.DecodeTar(body)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, s := range samples {
			keys = append(keys, s.Key)
			out[s.Key] = r.check(s)
		}
	}
	return keys, out
}

// check holds a clip's frames to PyAV's decode of the frames its JSON
// names, and returns what is kept of it.
func (r *clipReader) check(s client.Sample) servedClip {
	r.t.Helper()
	var js struct {
		Video string
		PTS   []int64
	}
	if err := json.Unmarshal(s.Files["json"], &js); err != nil {
		r.t.Fatalf("%s: %v", s.Key, err)
	}
	v := r.videos[js.Video]
	arr, err := client.ParseNPY(s.Files[client.Frames])
	if err != nil || v == nil || fmt.Sprint(arr.Shape) != fmt.Sprint([]int{len(js.PTS), v.ref.Height, v.ref.Width, 3}) {
		r.t.Fatalf("%s: frames %v %v of %q", s.Key, err, arr.Shape, js.Video)
	}
	n := v.ref.Width * v.ref.Height * 3
	var c servedClip
	for i, pts := range js.PTS {
		if want, ok := v.ref.Frames[pts]; !ok || !bytes.Equal(arr.Data[i*n:(i+1)*n], want) {
			r.t.Fatalf("%s: frame %d (pts %d of %s) is not PyAV's", s.Key, i, pts, js.Video)
		}
		for _, g := range v.gops[pts] {
			c.gops = append(c.gops, fmt.Sprintf("%s#%d", strings.TrimPrefix(js.Video, "videos/"), g))
		}
		r.frames++
	}
	c.digest = sha256.Sum256(arr.Data)
	return c
}

// gopSet is the GOPs clips need.
func (r *clipReader) gopSet(clips map[string]servedClip) map[string]bool {
	out := map[string]bool{}
	for _, c := range clips {
		for _, g := range c.gops {
			out[g] = true
		}
	}
	return out
}

// gopsIn are the GOPs a GET read ("video#gop"): those whose bytes lie in
// its range.
func (r *clipReader) gopsIn(g proxiedGet) []string {
	key := strings.TrimPrefix(g.key, "videos/")
	var lo, hi int64
	if _, err := fmt.Sscanf(g.rng, "bytes=%d-%d", &lo, &hi); err != nil {
		return nil
	}
	v := r.videos[key]
	if v == nil {
		return nil
	}
	var out []string
	for i, gop := range v.track.GOPs {
		if n := len(gop.Ranges); n > 0 && gop.Ranges[0].Off >= lo && gop.Ranges[n-1].End() <= hi+1 {
			out = append(out, fmt.Sprintf("%s#%d", key, i))
		}
	}
	return out
}

// covering is the bytes of the distinct GOPs clips need.
func (r *clipReader) covering(clips map[string]servedClip) int64 {
	seen := map[string]bool{}
	var n int64
	for _, c := range clips {
		for _, g := range c.gops {
			if seen[g] {
				continue
			}
			seen[g] = true
			key, num, _ := strings.Cut(g, "#")
			i, _ := strconv.Atoi(num)
			n += r.videos[key].track.GOPs[i].Bytes
		}
	}
	return n
}

// Clips of a tree of ffmpeg-written videos in MinIO, served by `brand
// serve` processes that decode them with libavcodec:
//
//   - every frame of every clip is PyAV's decode of the frame its JSON
//     names; every clip is served once an epoch;
//   - indexed with chunks of a GOP each (--chunk-size below a GOP's
//     bytes), an epoch reads from MinIO exactly the bytes of the GOPs its
//     clips' frames need, each once; with chunks of several GOPs the
//     reads are coalesced (a GET a chunk) and cost at most 1.3 times
//     those bytes;
//   - a global step is the same clips from one gateway at world 1, from
//     the union of world 8's ranks, and from a cluster of three, whose
//     nodes read each GOP from MinIO once an epoch between them;
//   - an epoch begun at world 8 and resumed at world 3 (offset=) serves
//     every clip the rest of it holds, once.
func TestVideoClipsOnMinIO(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	src, own := srv.NewBucket(t), srv.NewBucket(t)
	proxy := newStoreProxy(t, srv.URL(), src)
	bin := buildBrand(t)
	env := brandEnv(srv)
	store, err := s3backend.Open(ctx, "s3://"+src, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range videoKeys {
		names = append(names, f)
	}
	made := videotest.Make(t, t.TempDir(), names...)
	videos := map[string]*sourceVideo{}
	for key, f := range videoKeys {
		p, ok := made[f]
		if !ok {
			t.Fatalf("ffmpeg made no %s", f)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		putBytes(t, store, "videos/"+key, b)
		file, err := mp4.Index(ctx, mp4.Bytes(b), int64(len(b)), mp4.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		v := &sourceVideo{ref: videotest.Decode(t, p), track: file.Video, gops: map[int64][]int{}}
		tr := &v.track
		for _, fr := range tr.Frames {
			g := int(fr.GOP)
			v.gops[fr.PTS] = []int{g}
			if g > 0 && tr.GOPs[g].Leading && fr.PTS < tr.Samples[tr.GOPs[g].First].PTS {
				v.gops[fr.PTS] = []int{g - 1, g}
			}
		}
		videos["videos/"+key] = v
	}
	// The clips' JSON names videos by their keys under the index's root.
	for key, v := range videos {
		videos[strings.TrimPrefix(key, "videos/")] = v
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	r := &clipReader{t: t, hc: hc, job: "dataset=vid&clip=8&stride=2&seed=11&window=2", videos: videos}
	dense := r.job
	epochOf := func(url string) (clips, steps int) {
		var info struct{ Samples, Batches int }
		if err := json.Unmarshal(fetch(t, url+"/epoch/0?"+r.job+"&batch_size=8"), &info); err != nil {
			t.Fatal(err)
		}
		return info.Samples, info.Batches
	}
	const global = 8

	// A GOP a chunk, and a clip a video an epoch (step= past every
	// video's length): the epoch needs some of each video's GOPs, and
	// reads those alone. Several GOPs a chunk, and the clips tiling the
	// videos: the epoch needs nearly all of them, read a chunk a GET.
	var total int64
	for key, v := range videos {
		if !strings.HasPrefix(key, "videos/") {
			for _, g := range v.track.GOPs {
				total += g.Bytes
			}
		}
	}
	for _, tc := range []struct {
		name, chunk, job string
		exact            bool
	}{{"a GOP a chunk", "1KiB", dense + "&step=1000", true}, {"several GOPs a chunk", "64KiB", dense, false}} {
		t.Run(tc.name, func(t *testing.T) {
			r.t, r.job = t, tc.job
			defer func() { r.job = dense }()
			dst := "s3://" + own + "/" + strings.ReplaceAll(tc.chunk, "KiB", "k")
			runBrand(t, bin, env, "index", "--src", "s3://"+src+"/videos", "--dst", dst, "--s3-endpoint", proxy.URL, "--chunk-size", tc.chunk)
			gw := serveProc(t, bin, env, proxy.URL, "--cache-size", "64MiB", "--dataset", "vid="+dst)
			clips, steps := epochOf(gw.url)
			proxy.take(src, "")
			// Two epochs: the prefetch reads the next epoch's first
			// GOPs ahead of its requests.
			both := map[string]servedClip{}
			for epoch := range 2 {
				all := map[string]servedClip{}
				for m := range steps {
					_, got := r.step([]string{gw.url}, epoch, m, 1, global, 0)
					for k, c := range got {
						if _, dup := all[k]; dup {
							t.Fatalf("clip %s served twice in epoch %d", k, epoch)
						}
						all[k] = c
						both[fmt.Sprint(epoch, k)] = c
					}
				}
				if len(all) != clips {
					t.Fatalf("epoch %d: %d clips, the epoch has %d", epoch, len(all), clips)
				}
			}
			gets := proxy.take(src, ".mp4")
			// The prefetch may have begun reading epoch 2's first GOPs:
			// read it too, to know them.
			next := map[string]servedClip{}
			for m := range steps {
				_, got := r.step([]string{gw.url}, 2, m, 1, global, 0)
				for k, c := range got {
					next[k] = c
				}
			}
			need, later := r.gopSet(both), r.gopSet(next)
			var read, ahead int64
			reads := map[string]int{}
			for _, g := range gets {
				gops := r.gopsIn(g)
				for _, gop := range gops {
					reads[gop]++
				}
				switch {
				case slices.ContainsFunc(gops, func(x string) bool { return need[x] }):
					read += g.bytes
				case slices.ContainsFunc(gops, func(x string) bool { return later[x] }):
					ahead += g.bytes // epoch 2's, prefetched
				default:
					t.Errorf("%s %s (GOPs %q) is no GOP epochs 0 to 2 need", g.key, g.rng, gops)
				}
			}
			cover := r.covering(both)
			t.Logf("%s: 2 epochs of %d clips, %d frames equal to PyAV's; MinIO sent %d bytes of their GOPs in %d GETs (%.2f a clip) and %d of epoch 2's ahead; the clips' GOPs are %d bytes (%.3f×) of the videos' %d",
				tc.name, clips, r.frames, read, len(gets), float64(len(gets))/float64(2*clips), ahead, cover, float64(read)/float64(cover), total)
			for k, n := range reads {
				if n != 1 {
					t.Errorf("%s read %d times", k, n)
				}
			}
			for k := range need {
				if reads[k] == 0 && tc.exact {
					t.Errorf("GOP %s the clips need was never read", k)
				}
			}
			if tc.exact && (read != cover || cover*4 > 3*total) {
				t.Errorf("two epochs read %d bytes of their GOPs from MinIO; their clips' GOPs are %d of the videos' %d", read, cover, total)
			}
			if !tc.exact && (read < cover || float64(read) > 1.3*float64(cover)) {
				t.Errorf("two epochs read %d bytes from MinIO for clips whose GOPs are %d: over 1.3×", read, cover)
			}
			// /plan predicts those bytes before anything is read.
			var plan struct {
				Clips api.ClipPlan
			}
			if err := json.Unmarshal(fetch(t, gw.url+"/plan?"+r.job+"&batch_size=8&epochs=2&cache_size=64MiB"), &plan); err != nil {
				t.Fatal(err)
			}
			var planned, covering int64
			for _, e := range plan.Clips.Epochs {
				planned += e.StoreBytes
				covering += e.CoveringBytes
			}
			t.Logf("/plan: %d store bytes for 2 epochs (covering GOPs %d, each epoch's); %v ms a decoded frame (measured %v)", planned, covering, plan.Clips.CPUPerFrameMs, plan.Clips.Measured)
			if tc.exact && planned != cover {
				t.Errorf("/plan predicts %d store bytes for 2 epochs; they read %d of their GOPs", planned, cover)
			}
			if stats := statsBackendBytes(t, gw.url, "vid"); stats < read+ahead {
				t.Errorf("/stats counts %d backend bytes, MinIO sent %d", stats, read+ahead)
			}
		})
	}

	r.job = dense
	// One gateway and a cluster of three over the index of a GOP a chunk.
	dst := "s3://" + own + "/1k"
	one := serveProc(t, bin, env, proxy.URL, "--cache-size", "64MiB", "--dataset", "vid="+dst)
	ports := freePorts(t, 3)
	urls := make([]string, 3)
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	dir := t.TempDir()
	procs := make([]*clusterProc, 3)
	for k := range procs {
		procs[k] = &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)),
			args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]), "--s3-endpoint", proxy.URL,
				"--dataset", "vid=" + dst, "--cache-size", "64MiB", "--cache-prefault=false",
				"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k),
				"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
	}
	startProcs(t, procs, bin, env, "")
	clips, steps := epochOf(one.url)

	t.Run("world 1, world 8, three gateways", func(t *testing.T) {
		r.t = t
		const epoch = 1
		keys := make([][]string, steps)
		want := make([]map[string]servedClip, steps)
		seen := map[string]servedClip{}
		for m := range steps {
			keys[m], want[m] = r.step([]string{one.url}, epoch, m, 1, global, 0)
			for k, c := range want[m] {
				if _, dup := seen[k]; dup {
					t.Fatalf("clip %s twice in epoch %d", k, epoch)
				}
				seen[k] = c
			}
		}
		if len(seen) != clips {
			t.Fatalf("epoch %d: %d clips of %d", epoch, len(seen), clips)
		}
		proxy.take(src, "") // the single gateway's reads
		for m := range steps {
			for _, c := range []struct {
				name  string
				urls  []string
				world int
			}{{"one gateway, world 8", []string{one.url}, 8}, {"three gateways, world 8", urls, 8}, {"three gateways, world 1", urls, 1}} {
				got, clips := r.step(c.urls, epoch, m, c.world, global, 0)
				if !slices.Equal(got, keys[m]) {
					t.Fatalf("step %d, %s: clips %v, want %v", m, c.name, got, keys[m])
				}
				for k, cl := range clips {
					if cl.digest != want[m][k].digest {
						t.Fatalf("step %d, %s: clip %s's frames differ", m, c.name, k)
					}
				}
			}
		}
		// The cluster read each GOP the epoch needs once between its
		// nodes; the single gateway held its own from the first pass.
		gets := proxy.take(src, ".mp4")
		ranges := map[string]int{}
		for _, g := range gets {
			ranges[g.key+" "+g.rng]++
		}
		for k, n := range ranges {
			if n != 1 {
				t.Errorf("the cluster read %s %d times in an epoch", k, n)
			}
		}
		if read, cover := getBytes(gets), r.covering(seen); read != cover {
			t.Errorf("the cluster read %d bytes from MinIO in an epoch; its clips' GOPs are %d", read, cover)
		}
		t.Logf("epoch %d over a cluster of 3: %d GETs, %d bytes from MinIO for clips whose GOPs are %d bytes", epoch, len(gets), getBytes(gets), r.covering(seen))
	})

	t.Run("resumed at another world size", func(t *testing.T) {
		r.t = t
		const epoch, done = 2, 2 // world 8 reads 2 steps, world 3 the rest
		want := map[string]servedClip{}
		for m := range steps {
			_, c := r.step([]string{one.url}, epoch, m, 1, global, 0)
			for k, v := range c {
				want[k] = v
			}
		}
		got := map[string]servedClip{}
		add := func(c map[string]servedClip) {
			for k, v := range c {
				if _, dup := got[k]; dup {
					t.Fatalf("clip %s served twice across the resume", k)
				}
				got[k] = v
			}
		}
		for m := range done {
			_, c := r.step(urls, epoch, m, 8, global, 0)
			add(c)
		}
		const world3 = 3 * 2
		for m := 0; m*world3 < clips-done*global; m++ {
			_, c := r.step(urls, epoch, m, 3, world3, done*global)
			add(c)
		}
		if len(got) != len(want) {
			t.Fatalf("resumed: %d clips, the epoch holds %d", len(got), len(want))
		}
		for k, c := range want {
			if got[k].digest != c.digest {
				t.Fatalf("clip %s differs after the resume", k)
			}
		}
	})
	if w := proxy.writesRefused(); len(w) > 0 {
		t.Errorf("Brand tried to write to the source: %v", w)
	}
}
