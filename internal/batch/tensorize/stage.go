package tensorize

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/cache/gopcache"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

var (
	// ErrClosed means the stage was closed (the gateway is stopping).
	ErrClosed = errkind.Named(errkind.Busy, "shutting_down", "transform stage closed")
	// ErrTooLarge marks a transformed read over Config.MaxBytes, refused
	// before any image is decoded.
	ErrTooLarge = errkind.Named(errkind.Invalid, "too_large", "transformed samples too large")
)

// Buffers hands out output buffers counted against the memory budget of
// copies beside the cache (reader.Reader's copy budget): a transformed
// batch is a copy, held until its response is written.
type Buffers interface {
	// Buffer returns an empty buffer of capacity n and what gives it
	// back, waiting for the budget within its bound (an error otherwise).
	Buffer(ctx context.Context, n int64) ([]byte, func(), error)
	// TryBuffer is Buffer if the budget has room now.
	TryBuffer(n int64) ([]byte, func(), bool)
}

// Decodes is the memory images take while they decode
// (memory.Manager.Decodes): a reservation of an image's working memory,
// known from its header (transform.Footprint.Work), waits within the
// budget's bound or is refused with an error wrapping chunkcache.ErrBusy.
type Decodes interface {
	Reserve(ctx context.Context, n int64) (release func(), err error)
	// TryReserve takes n bytes if they are free now.
	TryReserve(n int64) (release func(), ok bool)
	// Size is the most that may be reserved at once: an image needing
	// more is never decoded here.
	Size() int64
}

// Config configures a Stage.
type Config struct {
	Pipelines *transform.Set
	// Workers bounds the samples transformed at once on the node; at
	// least 1.
	Workers int
	Buffers Buffers
	// Decodes is the memory for decoding (required): each image reserves
	// its working memory before it decodes.
	Decodes Decodes
	// MaxBytes bounds one call's output (the server's --max-batch-bytes).
	MaxBytes int64
	// GOPCache bounds the decoded frames clip jobs keep for later
	// batches (gopcache; 0 keeps none), reserved from GOPBudget (the
	// node's decodes: memory.Within; nil counts against the bound
	// alone).
	GOPCache  int64
	GOPBudget gopcache.Budget
	// Group runs the workers and ends them when it stops (nil: a part of
	// the stage's own, stopped by Close).
	Group    *stopper.Group
	Registry prometheus.Registerer
	Log      zerolog.Logger
}

// Stage transforms samples. Safe for concurrent use.
type Stage struct {
	set      *transform.Set
	pool     *pool
	buffers  Buffers
	decodes  Decodes
	maxBytes int64
	meters   map[string]*meter // per pipeline, fixed at New
	// video decodes clip jobs' GOPs (transform/video): a pool of decoder
	// contexts, each holding its footprint of the decodes, closed once
	// the workers have stopped.
	video       *video.Decoder
	frames      *gopcache.Cache // decoded GOPs kept for later batches of a horizon
	reorders    *lru.Cache[*mp4.Track, int]
	clipFigures clipFigures
	log         zerolog.Logger
}

// New returns a stage with its workers running; Close stops them.
func New(c Config) *Stage {
	part := stopper.Own(c.Group, "tensors: workers")
	s := &Stage{set: c.Pipelines, pool: newPool(c.Workers, part), buffers: c.Buffers, decodes: c.Decodes, maxBytes: c.MaxBytes,
		meters: map[string]*meter{}, log: c.Log}
	// Idle contexts for three streams a worker (a LeRobot job's cameras)
	// between runs: a context is opened once a worker and stream, not a
	// run (avcodec_open2 and, for some decoders, FFmpeg's process-wide
	// codec lock, off the hot path); each keeps its reservation of the
	// decodes, closed to make room.
	s.video = video.NewDecoder(video.Options{Budget: c.Decodes, MaxIdle: 3 * max(c.Workers, 1)})
	s.frames = gopcache.New(gopcache.Config{Limit: c.GOPCache, Budget: c.GOPBudget})
	s.reorders, _ = lru.New[*mp4.Track, int](maxReorders)
	part.OnStop(s.video.Close)
	for _, name := range s.set.Names() {
		s.meters[name] = &meter{}
	}
	s.meters[bucketsMeter] = &meter{}
	s.register(c.Registry)
	return s
}

// Close stops the workers and waits for the samples they are
// transforming; calls still waiting for a worker fail with ErrClosed.
// Idempotent.
func (s *Stage) Close() { s.pool.close() }

// Pipeline returns the pipeline of that name; an unknown name is
// transform.ErrUnknownPipeline naming the pipelines there are.
func (s *Stage) Pipeline(name string) (*transform.Pipeline, error) { return s.set.Get(name) }

// OnFailure says what a call does with a sample whose image the pipeline
// cannot transform (undecodable, truncated, over the pixel bound).
type OnFailure int

const (
	// Fail fails the call with an error naming the sample and the member
	// (wrapping transform.ErrDecode or transform.ErrTooLarge).
	Fail OnFailure = iota
	// Skip leaves the sample out: Output.Failed names its position.
	Skip
	// Keep keeps the sample as it came, untransformed, for the caller to
	// decide (a peer's request: the asker's stage, meeting the same
	// image, applies its own policy): Output.Failed names its position.
	Keep
)

// Sample is one sample to transform: its bytes (the tar members the
// index names, or a sample transformed already, whose members are no
// images and pass through) and its key.
type Sample struct {
	Data []byte
	Key  transform.Key
	// Name and Dataset name the sample in errors and logs.
	Name, Dataset string
}

// Request is one call's work.
type Request struct {
	Pipeline *transform.Pipeline
	Samples  []Sample
	On       OnFailure
	// NoWait takes the output's memory, and each decode's, only if the
	// budget has it now: work ahead is a bet, never worth waiting for
	// (ErrBusy otherwise).
	NoWait bool
	// Place is the batch's place in the workers' queue (Place): a job's
	// earlier batches are transformed first.
	Place Place
}

// ErrBusy means a NoWait request found no room in the budget.
var ErrBusy = errkind.Named(errkind.Busy, "transform_busy", "no memory for transformed samples now")

// Output is a call's samples, transformed, in order, in one buffer that
// counts against the copy budget until Release.
type Output struct {
	Parts net.Buffers // the samples kept, in order
	Bytes int64
	// Failed are the positions of the samples left out (Skip) or kept as
	// they came (Keep), ascending, and Errors why, naming each.
	Failed []int
	Errors []error
	// Images is how many images this call transformed (a sample a peer
	// transformed already counts none).
	Images  int
	release func()
}

// Release gives the output's buffer back. Idempotent.
func (o *Output) Release() {
	if o.release != nil {
		o.release()
		o.release = nil
	}
}

// Apply transforms req's samples: every image member of each becomes its
// tensor, as a .npy member of the tensor's size, and every other member
// passes through. The outputs' sizes are known from the images' headers
// before any pixel is decoded: the call takes that much of the copy
// budget at once, refuses more than MaxBytes (ErrTooLarge; so is a
// single tensor over it, whatever req.On says), then
// transforms the samples on the stage's workers, each into its place in
// the one buffer. On error nothing is held.
func (s *Stage) Apply(ctx context.Context, req Request) (*Output, error) {
	p := req.Pipeline
	m := s.meters[p.Name()]
	if m == nil && transform.IsBucketName(p.Name()) {
		m = s.meters[bucketsMeter]
	}
	if m == nil {
		return nil, fmt.Errorf("%w %q: not one of this stage's", transform.ErrUnknownPipeline, p.Name())
	}
	n := len(req.Samples)
	lays := make([]layout, n)
	failed := make([]error, n)
	sizes := make([]int, n) // each sample's room in the buffer
	var total int64
	for i, smp := range req.Samples {
		l, member, err := plan(p, smp.Data, smp.Key, s.maxBytes, s.decodes.Size())
		if err != nil {
			err = s.named(smp, member, err)
			if errors.Is(err, ErrTooLarge) {
				// A good image whose tensor no call can hold: the request
				// is refused, whatever it does with bad images.
				return nil, err
			}
			m.Add(transform.Result{}, err)
			if req.On == Fail {
				return nil, err
			}
			failed[i] = err
			if req.On == Keep {
				sizes[i] = len(smp.Data)
			}
		} else {
			lays[i] = l
			sizes[i] = l.size
			if req.On == Keep {
				// An image may still fail in its pixels: room to keep it.
				sizes[i] = max(l.size, len(smp.Data))
			}
		}
		total += int64(sizes[i])
	}
	if total > s.maxBytes {
		return nil, fmt.Errorf("%w: %d samples transformed with pipeline %q make %d bytes, over the server's --max-batch-bytes (%d)",
			ErrTooLarge, n, p.Name(), total, s.maxBytes)
	}
	buf, release, err := s.buffer(ctx, total, req.NoWait)
	if err != nil {
		return nil, err
	}
	out := &Output{release: release}
	regions := make([][]byte, n)
	off := 0
	for i := range n {
		regions[i] = buf[off : off : off+sizes[i]]
		off += sizes[i]
	}
	images := make([]int, n)
	writer := imagesOf(p)
	fatal := make([]error, n) // not the image's fault: the call fails
	err = s.pool.run(ctx, req.Place, n, func(i int, sc *transform.Scratch) {
		smp := req.Samples[i]
		if failed[i] == nil {
			var member string
			var err error
			regions[i], member, err = write(ctx, regions[i], lays[i], smp.Data, writer, smp.Key, sc, &m.Meter, s.reserve(req.NoWait))
			if err == nil {
				images[i] = lays[i].images()
				return
			}
			if !badImage(err) {
				fatal[i] = err
				return
			}
			failed[i] = s.named(smp, member, err)
		}
		if req.On == Keep {
			regions[i] = append(regions[i][:0], smp.Data...)
		}
	})
	if err == nil {
		err = errors.Join(fatal...)
	}
	if err != nil {
		out.Release()
		return nil, err
	}
	for i := range n {
		out.Images += images[i]
		if failed[i] != nil {
			if req.On == Fail {
				out.Release()
				return nil, failed[i]
			}
			out.Failed = append(out.Failed, i)
			out.Errors = append(out.Errors, failed[i])
			if req.On == Skip {
				continue
			}
		}
		out.Parts = append(out.Parts, regions[i])
		out.Bytes += int64(len(regions[i]))
	}
	m.images(out.Images)
	return out, nil
}

// reserve is how a call's images take their working memory from the
// decodes: at once or not at all (noWait), or waiting within its bound.
func (s *Stage) reserve(noWait bool) func(ctx context.Context, n int64) (func(), error) {
	if !noWait {
		return s.decodes.Reserve
	}
	return func(_ context.Context, n int64) (func(), error) {
		release, ok := s.decodes.TryReserve(n)
		if !ok {
			return nil, fmt.Errorf("%w: %d bytes to decode an image", ErrBusy, n)
		}
		return release, nil
	}
}

// buffer takes n bytes of the budget, at once or waiting.
func (s *Stage) buffer(ctx context.Context, n int64, noWait bool) ([]byte, func(), error) {
	if noWait {
		buf, release, ok := s.buffers.TryBuffer(n)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %d bytes", ErrBusy, n)
		}
		return buf, release, nil
	}
	return s.buffers.Buffer(ctx, n)
}

// badImage reports whether err is the image's fault (it cannot be
// transformed), not the node's (no memory for it now, the call ended).
func badImage(err error) bool {
	return errors.Is(err, transform.ErrDecode) || errors.Is(err, transform.ErrTooLarge)
}

// named says which sample and member an image error is about; it wraps
// the pipeline's sentinel, which decides the status a client sees.
func (s *Stage) named(smp Sample, member string, err error) error {
	if errors.Is(err, ErrClosed) || !errors.Is(err, transform.ErrDecode) && !errors.Is(err, transform.ErrTooLarge) && !errors.Is(err, ErrTooLarge) {
		return err
	}
	return fmt.Errorf("sample %q of dataset %s, member %q: %w", smp.Name, smp.Dataset, member, err)
}

// Load is how busy the stage is: what a peer deciding where to transform
// needs to know, told it in this node's state (nodestate.Load, whose Wait
// the router compares).
type Load struct {
	// Queued is the samples submitted and not yet transformed.
	Queued  int64 `json:"queued"`
	Workers int   `json:"workers"`
	// PerImage is the mean CPU of an image, over every pipeline; 0
	// before the first.
	PerImage time.Duration `json:"per_image_ns"`
}

// bucketsMeter names the figures of every shape bucket's pipeline
// (transform.BucketName), which the stage makes on demand: one meter for
// them all, as /stats and the metrics name it.
const bucketsMeter = "bucket:*"

// Fingerprints returns the stage's pipelines' fingerprints, by name.
func (s *Stage) Fingerprints() map[string]string {
	fps := make(map[string]string, len(s.meters))
	for _, name := range s.set.Names() {
		p, _ := s.set.Get(name)
		fps[name] = p.Fingerprint()
	}
	return fps
}

// Load returns the stage's load now.
func (s *Stage) Load() Load {
	var images uint64
	var cpu time.Duration
	for _, m := range s.meters {
		st := m.Stats()
		images += st.Images
		cpu += st.CPU
	}
	l := Load{Queued: s.pool.queued.Load(), Workers: s.pool.workers}
	if images > 0 {
		l.PerImage = cpu / time.Duration(images)
	}
	return l
}

// Stats are the stage's figures for /stats: per pipeline, images, failures,
// CPU per image and images per second.
func (s *Stage) Stats() api.TransformStats {
	st := api.TransformStats{Workers: s.pool.workers, Queued: s.pool.queued.Load(), Running: s.pool.running.Load()}
	now := time.Now()
	for _, name := range s.set.Names() {
		p, _ := s.set.Get(name)
		st.Decoder = p.Decoder()
		m := s.meters[name]
		ms := m.Stats()
		st.Pipelines = append(st.Pipelines, api.TransformPipelineStat{Name: name, Fingerprint: p.Fingerprint(),
			Images: ms.Images, Failed: ms.Failed, CPUSeconds: ms.CPU.Seconds(), CPUPerImageMs: float64(ms.PerImage()) / 1e6,
			ImagesPerCoreSecond: ms.ImagesPerCoreSecond(), ImagesPerSecond: m.rate(now)})
	}
	if m := s.meters[bucketsMeter]; m.Stats().Images > 0 {
		ms := m.Stats()
		st.Pipelines = append(st.Pipelines, api.TransformPipelineStat{Name: bucketsMeter,
			Images: ms.Images, Failed: ms.Failed, CPUSeconds: ms.CPU.Seconds(), CPUPerImageMs: float64(ms.PerImage()) / 1e6,
			ImagesPerCoreSecond: ms.ImagesPerCoreSecond(), ImagesPerSecond: m.rate(now)})
	}
	return st
}

// Meter returns a pipeline's figures so far.
func (s *Stage) Meter(name string) (transform.MeterStats, bool) {
	m, ok := s.meters[name]
	if !ok {
		return transform.MeterStats{}, false
	}
	return m.Stats(), true
}

// meter is a pipeline's figures: transform.Meter's, and the images of the
// last rateWindow seconds, one bucket a second.
type meter struct {
	transform.Meter
	mu      sync.Mutex
	buckets [rateWindow]struct{ sec, n int64 }
}

const rateWindow = 10

func (m *meter) images(n int) {
	if n == 0 {
		return
	}
	sec := time.Now().Unix()
	m.mu.Lock()
	b := &m.buckets[sec%rateWindow]
	if b.sec != sec {
		b.sec, b.n = sec, 0
	}
	b.n += int64(n)
	m.mu.Unlock()
}

// rate is the images a second over the last rateWindow seconds.
func (m *meter) rate(now time.Time) float64 {
	sec := now.Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, b := range m.buckets {
		if b.sec > sec-rateWindow && b.sec <= sec {
			n += b.n
		}
	}
	return float64(n) / rateWindow
}

// register adds the stage's collectors, read from its meters, which
// /stats reads too.
func (s *Stage) register(reg prometheus.Registerer) {
	for _, name := range slices.Sorted(maps.Keys(s.meters)) {
		m := s.meters[name]
		l := prometheus.Labels{"pipeline": name}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_transform_images_total", ConstLabels: l,
				Help: "Images this node transformed, per pipeline (a batch's, a peer's, ahead of a request)."},
				func() float64 { return float64(m.Stats().Images) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_transform_failures_total", ConstLabels: l,
				Help: "Images this node could not transform (undecodable, truncated, over --max-image-pixels), per pipeline."},
				func() float64 { return float64(m.Stats().Failed) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brand_transform_cpu_seconds_total", ConstLabels: l,
				Help: "Thread CPU time of this node's transforms, per pipeline; over brand_transform_images_total it is the CPU per image."},
				func() float64 { return m.Stats().CPU.Seconds() }),
		)
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_transform_queued",
			Help: "Samples waiting for or being transformed by this node's workers."},
			func() float64 { return float64(s.pool.queued.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_transform_workers",
			Help: "This node's transform workers (--transform-workers)."},
			func() float64 { return float64(s.pool.workers) }),
	)
	s.registerClips(reg)
}
