package tensorize

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/transform"
)

// budget is a Buffers of size bytes that records what it handed out.
type budget struct {
	mu           sync.Mutex
	size, held   int64
	taken, given int
}

func (b *budget) Buffer(ctx context.Context, n int64) ([]byte, func(), error) {
	buf, release, ok := b.TryBuffer(n)
	if !ok {
		return nil, nil, fmt.Errorf("budget of %d full", b.size)
	}
	return buf, release, nil
}

func (b *budget) TryBuffer(n int64) ([]byte, func(), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.size {
		return nil, nil, false
	}
	b.held += n
	b.taken++
	var once sync.Once
	return make([]byte, 0, n), func() {
		once.Do(func() {
			b.mu.Lock()
			b.held -= n
			b.given++
			b.mu.Unlock()
		})
	}, true
}

// decodes is memory for decodes of n bytes, whose waits outlast any
// test's.
func decodes(n int64) *memory.Account {
	return memory.New(memory.Config{Parts: memory.Parts{Decodes: n}, MaxWait: time.Hour, Busy: chunkcache.ErrBusy}).Decodes()
}

const testConfig = `{"pipelines": {
	"tiny": {"ops": [{"op": "random_resized_crop", "size": [6, 8]}, {"op": "hflip"}]},
	"plain": {"ops": []},
	"resize": {"ops": [{"op": "resize", "size": 256}]}
}}`

func newStage(t testing.TB, b Buffers, workers int, maxBytes int64) *Stage {
	t.Helper()
	cfg, err := transform.ParseConfig([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	set, err := transform.NewSet(cfg, transform.Options{MaxPixels: 4000 * 4000})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Pipelines: set, Workers: workers, Buffers: b, Decodes: decodes(1 << 30), MaxBytes: maxBytes, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	t.Cleanup(s.Close)
	return s
}

func pipeline(t testing.TB, s *Stage, name string) *transform.Pipeline {
	t.Helper()
	p, err := s.Pipeline(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sampleOf packs members (name, bytes) as one sample, as brand pack does,
// and returns its bytes.
func sampleOf(t testing.TB, key string, members ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := chunkindex.NewChunkWriter(&buf)
	var ms []chunkindex.Member
	for _, m := range members {
		ms = append(ms, chunkindex.Member{Name: m[0], Size: int64(len(m[1])), Body: strings.NewReader(m[1])})
	}
	off, n, _, err := w.WriteSample(key, ms)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()[off : off+n]
}

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "transform", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func photo(t testing.TB, i, w, h int) string {
	t.Helper()
	p, err := photos.Sized(1, i, w, h, 90)
	if err != nil {
		t.Fatal(err)
	}
	return string(p.JPEG)
}

type member struct {
	name string
	data []byte
}

func members(t testing.TB, sample []byte) []member {
	t.Helper()
	if len(sample)%block != 0 {
		t.Fatalf("a sample of %d bytes: not whole tar blocks", len(sample))
	}
	tr := tar.NewReader(bytes.NewReader(sample))
	var out []member
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("not tar members: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, member{h.Name, b})
	}
}

// TestApplyRewritesImages: every image member becomes the tensor the
// pipeline makes of it under the sample's key, named .npy; every other
// member passes through byte for byte, headers included; a long name
// (PAX or GNU headers) is kept; and applying the stage to its own output
// changes nothing (a sample a peer transformed passes through).
func TestApplyRewritesImages(t *testing.T) {
	b := &budget{size: 1 << 30}
	s := newStage(t, b, 2, 1<<30)
	long := "class/" + strings.Repeat("x", 120) + "/img"
	jpg, png := photo(t, 0, 40, 30), fixture(t, "photo.png")
	samples := []Sample{
		{Name: "a/1", Dataset: "d", Key: transform.SampleKey(7, "d", 0, 1),
			Data: sampleOf(t, "a/1", [2]string{"a/1.cls", "3"}, [2]string{"a/1.jpg", jpg}, [2]string{"a/1.json", `{"x": 1}`})},
		{Name: long, Dataset: "d", Key: transform.SampleKey(7, "d", 0, 2),
			Data: sampleOf(t, long, [2]string{long + ".PNG", png}, [2]string{long + ".txt", "caption"})},
		{Name: "a/3", Dataset: "d", Key: transform.SampleKey(7, "d", 0, 3),
			Data: sampleOf(t, "a/3", [2]string{"a/3.cls", "9"})},
	}
	for _, name := range []string{"tiny", transform.ImagenetEval} {
		t.Run(name, func(t *testing.T) {
			p := pipeline(t, s, name)
			out, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: samples})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			if len(out.Parts) != 3 || out.Images != 2 || len(out.Failed) != 0 {
				t.Fatalf("%d parts, %d images, failed %v", len(out.Parts), out.Images, out.Failed)
			}
			want := [][]member{
				{{"a/1.cls", []byte("3")}, {"a/1.npy", tensor(t, p, jpg, samples[0].Key)}, {"a/1.json", []byte(`{"x": 1}`)}},
				{{long + ".npy", tensor(t, p, png, samples[1].Key)}, {long + ".txt", []byte("caption")}},
				{{"a/3.cls", []byte("9")}},
			}
			var total int64
			for i, part := range out.Parts {
				total += int64(len(part))
				got := members(t, part)
				if len(got) != len(want[i]) {
					t.Fatalf("sample %d: members %v", i, got)
				}
				for j := range got {
					if got[j].name != want[i][j].name || !bytes.Equal(got[j].data, want[i][j].data) {
						t.Errorf("sample %d member %d: %q (%d bytes), want %q (%d bytes)", i, j, got[j].name, len(got[j].data), want[i][j].name, len(want[i][j].data))
					}
				}
			}
			// A sample with no image is its own bytes.
			if !bytes.Equal(out.Parts[2], samples[2].Data) {
				t.Error("a sample without images changed")
			}
			if total != out.Bytes {
				t.Errorf("Bytes %d, parts %d", out.Bytes, total)
			}
			// Transformed again: the same bytes, no image transformed.
			again := make([]Sample, len(samples))
			for i := range samples {
				again[i] = samples[i]
				again[i].Data = out.Parts[i]
			}
			out2, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: again})
			if err != nil {
				t.Fatal(err)
			}
			defer out2.Release()
			if out2.Images != 0 || !bytes.Equal(bytes.Join(out2.Parts, nil), bytes.Join(out.Parts, nil)) {
				t.Errorf("transformed twice: %d images, same bytes %t", out2.Images, bytes.Equal(bytes.Join(out2.Parts, nil), bytes.Join(out.Parts, nil)))
			}
		})
	}
	if b.held != 0 || b.taken != b.given {
		t.Errorf("the budget holds %d bytes after every output was released (%d taken, %d given)", b.held, b.taken, b.given)
	}
}

func tensor(t testing.TB, p *transform.Pipeline, img string, key transform.Key) []byte {
	t.Helper()
	res, err := p.Apply(nil, []byte(img), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Out
}

// TestBadImages: an undecodable, a truncated, an oversized image fail
// the call naming the sample and member, or are left out, or kept as
// they came, as asked; the others are transformed either way.
func TestBadImages(t *testing.T) {
	s := newStage(t, &budget{size: 1 << 30}, 2, 1<<30)
	p := pipeline(t, s, "tiny")
	good := sampleOf(t, "ok", [2]string{"ok.jpg", photo(t, 1, 30, 20)})
	for _, tt := range []struct {
		file     string
		sentinel error
	}{{"garbage.jpg", transform.ErrDecode}, {"truncated.jpg", transform.ErrDecode}, {"bomb.jpg", transform.ErrTooLarge}, {"bomb.png", transform.ErrTooLarge}} {
		bad := sampleOf(t, "bad/x", [2]string{"bad/x.cls", "1"}, [2]string{"bad/x.jpg", fixture(t, tt.file)})
		in := []Sample{{Name: "ok", Dataset: "d", Data: good}, {Name: "bad/x", Dataset: "d", Data: bad}, {Name: "ok2", Dataset: "d", Data: good}}
		t.Run(tt.file, func(t *testing.T) {
			_, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in, On: Fail})
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), `sample "bad/x" of dataset d, member "bad/x.jpg"`) {
				t.Errorf("fail: %v, want %v naming the sample and member", err, tt.sentinel)
			}
			out, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in, On: Skip})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Parts) != 2 || len(out.Failed) != 1 || out.Failed[0] != 1 || !errors.Is(out.Errors[0], tt.sentinel) || out.Images != 2 {
				t.Errorf("skip: %d parts, failed %v (%v), %d images", len(out.Parts), out.Failed, out.Errors, out.Images)
			}
			out.Release()
			out, err = s.Apply(context.Background(), Request{Pipeline: p, Samples: in, On: Keep})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Parts) != 3 || len(out.Failed) != 1 || !bytes.Equal(out.Parts[1], bad) {
				t.Errorf("keep: %d parts, failed %v, the bad one kept as it came: %t", len(out.Parts), out.Failed, bytes.Equal(out.Parts[1], bad))
			}
			out.Release()
		})
	}
	st, _ := s.Meter("tiny")
	if st.Failed != 12 {
		t.Errorf("%d failures counted, want 3 calls × 4 images", st.Failed)
	}
}

// widePNG is a 1×width grey PNG: a few hundred bytes, a good image.
func widePNG(t testing.TB, width int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, width, 1))); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestTensorOverTheBound: a good image whose tensor alone is over
// MaxBytes refuses the call (ErrTooLarge, naming the bound, the sample
// and the member) before its tar header is written, whatever the call
// does with bad images: it is never called a bad image, skipped or kept.
// The reproduction: a 1×100000 PNG through a `resize 256` pipeline (a
// tensor of 256 × 25,600,000 × 3 bytes) answered 422 "cannot decode image
// … USTAR cannot encode Size=…", and with --on-bad-image=skip the batch
// was served without it.
func TestTensorOverTheBound(t *testing.T) {
	const maxBytes = 256 << 20
	s := newStage(t, &budget{size: 1 << 30}, 2, maxBytes)
	p := pipeline(t, s, "resize")
	good := sampleOf(t, "ok", [2]string{"ok.jpg", photo(t, 1, 30, 20)})
	wide := sampleOf(t, "wide/x", [2]string{"wide/x.cls", "1"}, [2]string{"wide/x.png", widePNG(t, 100000)})
	in := []Sample{{Name: "ok", Dataset: "d", Data: good}, {Name: "wide/x", Dataset: "d", Data: wide}}
	for _, on := range []OnFailure{Fail, Skip, Keep} {
		out, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in, On: on})
		if err == nil {
			out.Release()
		}
		switch {
		case !errors.Is(err, ErrTooLarge) || errors.Is(err, transform.ErrDecode):
			t.Errorf("on failure %d: %v; want ErrTooLarge, not a bad image", on, err)
		case !strings.Contains(err.Error(), "--max-batch-bytes (268435456)") || !strings.Contains(err.Error(), `sample "wide/x" of dataset d, member "wide/x.png"`):
			t.Errorf("on failure %d: %v; want the bound, the sample and the member named", on, err)
		}
	}
	if st, _ := s.Meter("resize"); st.Failed != 0 {
		t.Errorf("%d images counted as failed; a tensor too large is no bad image", st.Failed)
	}
}

// TestTensorHeaderBeyondUSTAR: a tensor too large for the image's USTAR
// header (8 GiB and more, under a --max-batch-bytes that allows it) gets
// a header that holds its size, which archive/tar reads back.
func TestTensorHeaderBeyondUSTAR(t *testing.T) {
	smp := sampleOf(t, "k", [2]string{"k.png", "abc"})
	img, err := tar.NewReader(bytes.NewReader(smp)).Next()
	if err != nil {
		t.Fatal(err)
	}
	const size = 9 << 30
	h, err := tensorHeader(img, "k.npy", size)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tar.NewReader(bytes.NewReader(append(h, make([]byte, 512)...))).Next()
	if err != nil || got.Name != "k.npy" || got.Size != size {
		t.Fatalf("read back: %+v, %v", got, err)
	}
}

// TestBudget: a call takes its output's exact size from the budget
// before decoding anything, refuses more than MaxBytes, and with NoWait
// takes nothing rather than wait.
func TestBudget(t *testing.T) {
	b := &budget{size: 1 << 20}
	s := newStage(t, b, 1, 64<<10)
	p := pipeline(t, s, "tiny")
	in := []Sample{{Name: "x", Data: sampleOf(t, "x", [2]string{"x.jpg", photo(t, 2, 30, 30)}, [2]string{"x.cls", "2"})}}
	out, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in})
	if err != nil {
		t.Fatal(err)
	}
	if b.held != out.Bytes {
		t.Errorf("the budget holds %d bytes for an output of %d", b.held, out.Bytes)
	}
	out.Release()
	out.Release()
	if b.held != 0 {
		t.Errorf("released twice: the budget holds %d", b.held)
	}
	big := pipeline(t, s, transform.ImagenetEval) // 150 KB a tensor
	if _, err := s.Apply(context.Background(), Request{Pipeline: big, Samples: in}); !errors.Is(err, ErrTooLarge) || b.taken != 1 {
		t.Errorf("over MaxBytes: %v, %d buffers taken", err, b.taken)
	}
	b.size = 10
	if _, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in, NoWait: true}); !errors.Is(err, ErrBusy) {
		t.Errorf("no room, no wait: %v", err)
	}
}

// TestCloseWaits: Close with transforms in flight returns once the images
// being transformed are done, with no worker running; the calls in
// flight end (done, or ErrClosed), and later calls fail with ErrClosed.
func TestCloseWaits(t *testing.T) {
	s := newStage(t, &budget{size: 1 << 30}, 2, 1<<30)
	p := pipeline(t, s, "plain")
	var in []Sample
	for i := range 64 {
		in = append(in, Sample{Name: fmt.Sprint(i), Data: sampleOf(t, fmt.Sprint(i), [2]string{fmt.Sprint(i, ".jpg"), photo(t, i, 400, 300)})})
	}
	var wg sync.WaitGroup
	var closed, done atomic.Int32
	for range 3 {
		wg.Go(func() {
			out, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in})
			switch {
			case errors.Is(err, ErrClosed):
				closed.Add(1)
			case err != nil:
				t.Errorf("in flight at Close: %v", err)
			default:
				done.Add(1)
				out.Release()
			}
		})
	}
	for s.pool.running.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	if n := s.pool.running.Load(); n != 0 {
		t.Errorf("%d transforms running after Close", n)
	}
	wg.Wait()
	if closed.Load() == 0 {
		t.Errorf("every call in flight finished (%d): Close did not stop the queue", done.Load())
	}
	if _, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in[:1]}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if q := s.pool.queued.Load(); q != 0 {
		t.Errorf("%d samples counted as queued after Close", q)
	}
}

// TestCancelled: a call whose context ends stops handing samples to the
// workers and returns the context's error, holding nothing.
func TestCancelled(t *testing.T) {
	b := &budget{size: 1 << 30}
	s := newStage(t, b, 1, 1<<30)
	p := pipeline(t, s, "plain")
	var in []Sample
	for i := range 32 {
		in = append(in, Sample{Name: fmt.Sprint(i), Data: sampleOf(t, fmt.Sprint(i), [2]string{fmt.Sprint(i, ".jpg"), photo(t, i, 300, 300)})})
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for s.pool.running.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := s.Apply(ctx, Request{Pipeline: p, Samples: in}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if b.held != 0 || s.pool.queued.Load() != 0 {
		t.Errorf("after a cancelled call: %d bytes held, %d queued", b.held, s.pool.queued.Load())
	}
}

// watched is a Decodes that records what is reserved of it.
type watched struct {
	Decodes
	mu              sync.Mutex
	now, most, asks int
	bytes           []int64
}

func (w *watched) Reserve(ctx context.Context, n int64) (func(), error) {
	release, err := w.Decodes.Reserve(ctx, n)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.now++
	w.asks++
	w.most = max(w.most, w.now)
	w.bytes = append(w.bytes, n)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.now--
		w.mu.Unlock()
		release()
	}, nil
}

func newStageDecoding(t testing.TB, d Decodes, workers int) *Stage {
	t.Helper()
	cfg, err := transform.ParseConfig([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	set, err := transform.NewSet(cfg, transform.Options{MaxPixels: 4000 * 4000})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Pipelines: set, Workers: workers, Buffers: &budget{size: 1 << 30}, Decodes: d, MaxBytes: 1 << 30,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	t.Cleanup(s.Close)
	return s
}

// TestDecodeAdmission: each image reserves its working memory, from its
// header (transform.Footprint), before it decodes, and holds it only
// while it does: with room for one large image at a time, four workers
// decode them one at a time, and every image of the call is made.
func TestDecodeAdmission(t *testing.T) {
	var in []Sample
	var work int64
	for i := range 6 {
		img := photo(t, i, 1000, 800)
		in = append(in, Sample{Name: fmt.Sprint(i), Data: sampleOf(t, fmt.Sprint(i), [2]string{fmt.Sprint(i, ".jpg"), img})})
		p, _ := transform.New("plain", transform.Spec{Ops: []transform.Op{}}, transform.Options{})
		f, err := p.Footprint([]byte(img), transform.Key{})
		if err != nil {
			t.Fatal(err)
		}
		work = max(work, f.Work)
	}
	d := &watched{Decodes: decodes(work * 3 / 2)}
	s := newStageDecoding(t, d, 4)
	out, err := s.Apply(context.Background(), Request{Pipeline: pipeline(t, s, "plain"), Samples: in})
	if err != nil {
		t.Fatal(err)
	}
	out.Release()
	if out.Images != 6 || d.asks != 6 {
		t.Fatalf("%d images made, %d reservations", out.Images, d.asks)
	}
	if d.most != 1 {
		t.Errorf("%d images decoded at once in room for one", d.most)
	}
	for _, n := range d.bytes {
		if n < work*9/10 || n > work {
			t.Errorf("an image reserved %d bytes, its footprint is about %d", n, work)
		}
	}
	if held := d.Decodes.(*memory.Account).Held(); held != 0 {
		t.Errorf("%d bytes of decodes held after the call", held)
	}
}

// TestDecodeTooLarge: an image whose decode needs more than all of the
// node's memory for decodes is an image this node cannot transform —
// refused from its header (transform.ErrTooLarge, naming it), or left
// out and named — and never decoded.
func TestDecodeTooLarge(t *testing.T) {
	big := sampleOf(t, "big", [2]string{"big.jpg", photo(t, 0, 1000, 800)})
	small := sampleOf(t, "small", [2]string{"small.jpg", photo(t, 1, 40, 30)})
	d := &watched{Decodes: decodes(2 << 20)}
	s := newStageDecoding(t, d, 2)
	p := pipeline(t, s, "plain")
	in := []Sample{{Name: "small", Dataset: "d", Data: small}, {Name: "big", Dataset: "d", Data: big}}
	_, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in, On: Fail})
	if !errors.Is(err, transform.ErrTooLarge) || !strings.Contains(err.Error(), `sample "big"`) || !strings.Contains(err.Error(), "memory for decodes") {
		t.Fatalf("Fail: %v", err)
	}
	out, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in, On: Skip})
	if err != nil {
		t.Fatal(err)
	}
	out.Release()
	if len(out.Failed) != 1 || out.Failed[0] != 1 || out.Images != 1 {
		t.Errorf("Skip: failed %v, %d images", out.Failed, out.Images)
	}
	for _, n := range d.bytes {
		if n > 2<<20 {
			t.Errorf("reserved %d bytes of 2 MiB", n)
		}
	}
}

// TestDecodeBusy: when the memory for decodes stays taken past the
// bound, the call fails with chunkcache.ErrBusy (503 with Retry-After),
// whatever it does with bad images: no memory is not a bad image.
func TestDecodeBusy(t *testing.T) {
	acct := memory.New(memory.Config{Parts: memory.Parts{Decodes: 64 << 20}, MaxWait: 20 * time.Millisecond, Busy: chunkcache.ErrBusy}).Decodes()
	hold, err := acct.Reserve(context.Background(), 63<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	s := newStageDecoding(t, acct, 2)
	in := []Sample{{Name: "a", Dataset: "d", Data: sampleOf(t, "a", [2]string{"a.jpg", photo(t, 0, 1000, 800)})}}
	for _, on := range []OnFailure{Fail, Skip, Keep} {
		if _, err := s.Apply(context.Background(), Request{Pipeline: pipeline(t, s, "plain"), Samples: in, On: on}); !errors.Is(err, chunkcache.ErrBusy) {
			t.Errorf("on %d: %v, want chunkcache.ErrBusy", on, err)
		}
	}
	// Work ahead (NoWait) does not wait at all: ErrBusy.
	if _, err := s.Apply(context.Background(), Request{Pipeline: pipeline(t, s, "plain"), Samples: in, NoWait: true}); !errors.Is(err, ErrBusy) {
		t.Errorf("no wait: %v, want ErrBusy", err)
	}
	if acct.Held() != 63<<20 {
		t.Errorf("%d bytes held after the refused calls, 63 MiB before", acct.Held())
	}
}
