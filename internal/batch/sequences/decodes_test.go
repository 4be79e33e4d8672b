package sequences_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/vision"
)

// counted is a node's decodes (memory.Manager.Decodes) that counts what
// is reserved of it: every reservation, and the most held at once.
type counted struct {
	*memory.Account
	mu           sync.Mutex
	held, peak   int64
	reservations []int64
}

func (c *counted) took(n int64, give func()) func() {
	c.mu.Lock()
	c.held += n
	c.peak = max(c.peak, c.held)
	c.reservations = append(c.reservations, n)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.held -= n
		c.mu.Unlock()
		give()
	}
}

func (c *counted) Reserve(ctx context.Context, n int64) (func(), error) {
	give, err := c.Account.Reserve(ctx, n)
	if err != nil {
		return nil, err
	}
	return c.took(n, give), nil
}

func (c *counted) TryReserve(n int64) (func(), bool) {
	give, ok := c.Account.TryReserve(n)
	if !ok {
		return nil, false
	}
	return c.took(n, give), true
}

// visionStage is the pack stage on the transform stage's workers, as a
// gateway builds it, over a memory budget whose decodes share is decodes
// bytes.
func visionStage(t *testing.T, decodes int64, wait time.Duration) (*sequences.Stage, *counted, *memory.Manager) {
	t.Helper()
	mem := memory.New(memory.Config{Budget: memory.Budget{Copies: 256 << 20, Decodes: decodes}, MaxWait: wait, Busy: chunkcache.ErrBusy})
	set, err := transform.NewSet(transform.Config{}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &counted{Account: mem.Decodes()}
	stage := tensorize.New(tensorize.Config{Pipelines: set, Workers: 4, Buffers: mem.Copies(), Decodes: c, MaxBytes: 1 << 30, Registry: prometheus.NewRegistry()})
	t.Cleanup(stage.Close)
	return sequences.New(sequences.Config{Workers: stage, MaxBytes: 1 << 30}), c, mem
}

// bigPNG is a w×h PNG of noise-free stripes: small to store, w×h×4
// bytes decoded.
func bigPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := 0; x < w; x += 7 {
			img.SetNRGBA(x, y, color.NRGBA{uint8(y), uint8(x), 9, 255})
		}
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// work is what decoding a w×h PNG and resizing it to ow×oh takes, as
// vision.Writer resizes an image (a Resize to [oh, ow] of the whole
// image, CHW): its working memory and its output.
func work(t *testing.T, data []byte, ow, oh int) int64 {
	t.Helper()
	off := false
	p, err := transform.New("vision", transform.Spec{Ops: []transform.Op{{Op: transform.OpResize, Size: transform.Size{H: oh, W: ow}}},
		Layout: transform.CHW, ReducedDecode: &off}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := p.Footprint(data, transform.Key{})
	if err != nil {
		t.Fatal(err)
	}
	return fp.Work + int64(fp.Out)
}

// visionBatch is a batch of one sequence holding one image of data
// (W×H, resized to 64×64).
func visionBatch(data []byte, w, h int, noWait bool) sequences.VisionRequest {
	return sequences.VisionRequest{Writer: &vision.Writer{Seq: 80, Pad: 0}, Keys: []string{sequences.Key(0, 0)}, NoWait: noWait,
		Samples: [][]vision.Sample{{{IDs: make([]int32, 20), Loss: make([]uint8, 20),
			Images: []vision.Image{{Member: "s.png", Data: data, W: w, H: h, OutW: 64, OutH: 64, Span: vision.Span{Start: 2, Len: 16}}}}}}}
}

// TestVisionDecodesWithinBudget is issue 80, case 3: vision sequences'
// images decoded by the pack stage take their decode's memory from the
// node's decodes before decoding, as the transform stage's images do, so
// that jobs decoding large images at once never hold more than the share
// (8 jobs of 8000×8000 PNGs peaked past a 1 GiB limit). Here 8 batches
// at once on 4 workers, each image's decode more than half the share:
// one decode at a time, each reserved.
func TestVisionDecodesWithinBudget(t *testing.T) {
	const w, h = 1200, 1000
	data := bigPNG(t, w, h)
	need := work(t, data, 64, 64)
	if need < 4*w*h {
		t.Fatalf("a %d×%d PNG's decode takes %d bytes, less than its pixels", w, h, need)
	}
	share := need + need/2
	s, c, _ := visionStage(t, share, 30*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			out, err := s.PackVision(context.Background(), visionBatch(data, w, h, false))
			if err == nil {
				out.Release()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(c.reservations) != len(errs) {
		t.Fatalf("%d images decoded, %d decodes reserved (%v): a vision decode takes memory the budget does not see", len(errs), len(c.reservations), c.reservations)
	}
	for _, n := range c.reservations {
		if n < need {
			t.Errorf("a decode reserved %d bytes; it takes %d", n, need)
		}
	}
	if c.peak > share || c.held != 0 {
		t.Errorf("decodes held %d bytes at most of a share of %d, %d after", c.peak, share, c.held)
	}
}

// TestVisionDecodeRefused: an image whose decode needs more than the
// whole share is a bad image (422, vision.ErrBadImage and
// transform.ErrTooLarge) before a pixel is decoded, as the transform
// stage refuses it; a decode that finds no room waits the budget's
// bound and is refused busy (503), or, for a batch made ahead (NoWait),
// is refused at once.
func TestVisionDecodeRefused(t *testing.T) {
	const w, h = 600, 500
	data := bigPNG(t, w, h)
	need := work(t, data, 64, 64)

	s, c, _ := visionStage(t, need/2, time.Second)
	_, err := s.PackVision(context.Background(), visionBatch(data, w, h, false))
	if !errors.Is(err, vision.ErrBadImage) || !errors.Is(err, transform.ErrTooLarge) || errkind.Of(err) != errkind.Unprocessable {
		t.Errorf("an image whose decode needs %d bytes of a share of %d: %v; want a bad image too large for the node", need, need/2, err)
	}
	if len(c.reservations) != 0 {
		t.Errorf("reserved %v for an image it cannot decode", c.reservations)
	}

	s, _, mem := visionStage(t, 2*need, 50*time.Millisecond)
	give, err := mem.Decodes().Reserve(context.Background(), 2*need)
	if err != nil {
		t.Fatal(err)
	}
	defer give()
	if _, err := s.PackVision(context.Background(), visionBatch(data, w, h, false)); !errors.Is(err, chunkcache.ErrBusy) {
		t.Errorf("no room past the bound: %v; want chunkcache.ErrBusy", err)
	}
	if _, err := s.PackVision(context.Background(), visionBatch(data, w, h, true)); !errors.Is(err, tensorize.ErrBusy) {
		t.Errorf("no room for a batch made ahead: %v; want tensorize.ErrBusy", err)
	}
}
