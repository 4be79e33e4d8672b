//go:build brand_libav

package tensorize

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	fvideo "github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

// videoTree is a tree of videos written by ffmpeg (videotest.Fixtures
// named by files, each key's folder its class), indexed in place with
// chunks of about chunk bytes: its decoder, each key's file's bytes and
// path.
func videoTree(t *testing.T, chunk int64, files map[string]string) (*fvideo.Decoder, map[string][]byte, map[string]string) {
	t.Helper()
	var names []string
	for _, f := range files {
		names = append(names, f)
	}
	made := videotest.Make(t, t.TempDir(), names...)
	dir := t.TempDir()
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data, paths := map[string][]byte{}, map[string]string{}
	for key, f := range files {
		p, ok := made[f]
		if !ok {
			t.Skipf("ffmpeg made no %s", f)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		data[key], paths[key] = b, p
	}
	formats := []format.Format{fvideo.Format{}}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: formats, Options: format.Options{ChunkBytes: chunk}}); err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: "v", URL: "file://" + dir, Store: st, Formats: formats}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	dec, ok := ds.InPlace.Decoder.(*fvideo.Decoder)
	if !ok {
		t.Fatalf("the tree's decoder is a %T", ds.InPlace.Decoder)
	}
	return dec, data, paths
}

// gopSample is GOP g of video v as the reader gives it: a sample whose
// one member is the GOP's ranges' bytes back to back, in file order.
func gopSample(t *testing.T, d *fvideo.Dataset, file []byte, g clips.GOP) []byte {
	t.Helper()
	var member []byte
	for _, r := range d.Videos[g.Video].Track.GOPs[g.GOP].Ranges {
		member = append(member, file[r.Off:r.End()]...)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("v%d/%d.gop", g.Video, g.GOP), Mode: 0o644, Size: int64(len(member))}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write(member)
	_ = tw.Flush()
	return b.Bytes()
}

// clipRequest is the request of the clips numbered ns of space at epoch,
// with every GOP they need read from files.
func clipRequest(t *testing.T, dec *fvideo.Decoder, files map[string][]byte, space *clips.Space, epoch uint64, ns []int, layout video.Layout) ClipRequest {
	t.Helper()
	d := dec.Dataset()
	req := ClipRequest{Video: dec, Layout: layout, GOPs: map[clips.GOP][]byte{}, Rows: map[int][]byte{}}
	for _, n := range ns {
		c, err := space.Clip(3, epoch, n)
		if err != nil {
			t.Fatal(err)
		}
		req.Clips = append(req.Clips, ClipSample{Key: fmt.Sprintf("clip/%d", n), Clip: c, Draw: transform.Key{Seed: 3, Epoch: epoch, Sample: uint64(n)}})
		for _, g := range c.GOPs {
			req.GOPs[g] = gopSample(t, d, files[d.Videos[g.Video].Key], g)
		}
	}
	return req
}

// clipMembers reads a clip call's output: each sample's members by
// extension, in order.
func clipMembers(t *testing.T, out *ClipOutput) []map[string][]byte {
	t.Helper()
	var all []map[string][]byte
	for _, p := range out.Parts {
		m := map[string][]byte{}
		tr := tar.NewReader(bytes.NewReader(p))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			_, ext, _ := strings.Cut(strings.TrimPrefix(h.Name, "clip/"), ".")
			m[ext] = b
		}
		all = append(all, m)
	}
	return all
}

// TestClipFramesArePyAVs: every frame of every clip the stage decodes —
// H.264 with and without B-frames, a keyframe every second and every
// ten, variable frame rate, moov first and last, fragmented, an open
// GOP, H.265, VP9 — from the GOPs the index names is PyAV's decode of the
// frame its JSON names, its label is its class folder's, and
// clip_layout=tchw is the same frames transposed. (Which clips an epoch
// holds, each once, is layout's; the same over HTTP from `brand serve`
// processes, integration's TestVideoClipsOnMinIO.)
func TestClipFramesArePyAVs(t *testing.T) {
	files := map[string]string{}
	for i, f := range []string{"h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4", "h264-vfr.mp4", "h264-frag.mp4", "h264-opengop.mp4", "hevc.mp4", "vp9.mp4"} {
		files[fmt.Sprintf("class%d/v%d.mp4", i%3, i)] = f
	}
	dec, data, paths := videoTree(t, 4<<10, files)
	refs := map[string]videotest.Reference{}
	for key, p := range paths {
		refs[key] = videotest.Decode(t, p)
	}
	s := newStage(t, &budget{size: 1 << 30}, 4, 1<<30)
	type clipJSON struct {
		Sample, Segment, Label int
		Video                  string
		Frames                 []int
		PTS                    []int64
		Seconds                []float64
	}
	for _, p := range []clips.Params{{Frames: 8, Stride: 2}, {Frames: 5, FPS: 7, Step: 1, Fixed: true}} {
		space, err := clips.New(dec.Dataset(), p)
		if err != nil {
			t.Fatal(err)
		}
		for epoch := range uint64(2) {
			frames := 0
			for first := 0; first < space.Samples(); first += 3 {
				var ns []int
				for n := first; n < min(first+3, space.Samples()); n++ {
					ns = append(ns, n)
				}
				thwc, err := s.Clips(context.Background(), clipRequest(t, dec, data, space, epoch, ns, video.THWC))
				if err != nil {
					t.Fatalf("%+v, epoch %d, clips %v: %v", p, epoch, ns, err)
				}
				tchw, err := s.Clips(context.Background(), clipRequest(t, dec, data, space, epoch, ns, video.TCHW))
				if err != nil {
					t.Fatalf("%+v, epoch %d, clips %v in tchw: %v", p, epoch, ns, err)
				}
				transposed := clipMembers(t, tchw)
				for k, m := range clipMembers(t, thwc) {
					n := ns[k]
					var js clipJSON
					if err := json.Unmarshal(m["json"], &js); err != nil || js.Sample != n {
						t.Fatalf("clip %d: json %s (%v)", n, m["json"], err)
					}
					ref := refs[js.Video]
					arr, err := client.ParseNPY(m["frames.npy"])
					if err != nil || arr.DType != "|u1" || fmt.Sprint(arr.Shape) != fmt.Sprint([]int{len(js.PTS), ref.Height, ref.Width, 3}) {
						t.Fatalf("clip %d: frames %v %s %v; want (%d, %d, %d, 3) uint8", n, err, arr.DType, arr.Shape, len(js.PTS), ref.Height, ref.Width)
					}
					size := ref.Width * ref.Height * 3
					for i, pts := range js.PTS {
						want, ok := ref.Frames[pts]
						if !ok {
							t.Fatalf("clip %d: frame %d names pts %d, which PyAV's decode of %s has not", n, i, pts, js.Video)
						}
						if got := arr.Data[i*size : (i+1)*size]; string(got) != string(want) {
							t.Fatalf("clip %d (%s, %s): frame %d (pts %d) differs from PyAV's", n, js.Video, files[js.Video], i, pts)
						}
						frames++
					}
					var class int
					if _, err := fmt.Sscanf(js.Video, "class%d/", &class); err != nil || string(m["cls"]) != fmt.Sprint(class) || js.Label != class {
						t.Errorf("clip %d: label %q (json %d), its class folder is %d", n, m["cls"], js.Label, class)
					}
					ta, err := client.ParseNPY(transposed[k]["frames.npy"])
					if err != nil || fmt.Sprint(ta.Shape) != fmt.Sprint([]int{len(js.PTS), 3, ref.Height, ref.Width}) {
						t.Fatalf("clip %d: tchw %v %v", n, err, ta.Shape)
					}
					hw := ref.Width * ref.Height
					for i := range len(js.PTS) * hw * 3 {
						tt, rest := i/(3*hw), i%(3*hw)
						c, px := rest/hw, rest%hw
						if ta.Data[i] != arr.Data[tt*size+px*3+c] {
							t.Fatalf("clip %d: tchw differs from thwc transposed at %d", n, i)
						}
					}
				}
				thwc.Release()
				tchw.Release()
			}
			t.Logf("%+v, epoch %d: %d clips, %d frames equal to PyAV's", p, epoch, space.Samples(), frames)
		}
	}
}
