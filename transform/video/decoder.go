package video

import (
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/brandgw/brand/format/video/framesize"
)

// Budget is the node's memory for decodes (memory.Manager.Decodes: a
// *memory.Account has these methods). A decode reserves its Footprint
// before it opens or reuses a decoder.
type Budget interface {
	// Reserve waits for n bytes within the budget's bound, or fails.
	Reserve(ctx context.Context, n int64) (release func(), err error)
	// TryReserve takes n bytes if they are free now.
	TryReserve(n int64) (release func(), ok bool)
	// Size is the most that may be reserved at once.
	Size() int64
}

// Options configure a Decoder.
type Options struct {
	// Frames bounds a stream's frames; its unset fields are
	// framesize.Default's, the bound the index applies.
	Frames framesize.Bound
	// Budget is what decodes reserve their Footprint from; nil counts
	// nothing (tools and tests).
	Budget Budget
	// MaxIdle bounds the decoder contexts kept open between runs for
	// reuse; 0 is GOMAXPROCS, negative keeps none.
	MaxIdle int
	// DecodeDisposable sends every packet of a run to the decoder; by
	// default a disposable packet (a picture no later one references:
	// disposable.go) whose frame is not wanted is left out, which
	// changes no other frame's pixels.
	DecodeDisposable bool
}

// codecContext is one open decoder, used by one goroutine at a time.
type codecContext interface {
	send(p *Packet) error // nil: the end of the stream
	receive() (decoded, int, error)
	rgb(dst []byte) error // the frame receive returned, as PyAV's rgb24
	reset()               // back to its state after opening
	close()
}

// receive's outcomes.
const (
	recvFrame = iota
	recvAgain
	recvEnd
)

// decoded describes a frame the decoder returned.
type decoded struct {
	pts           int64
	width, height int
	format        string
	bytes         int64 // the frame's planes, unpadded
	corrupt       bool
	errors        int
	said          string // the decoder's first error message, if flagged
}

// Decoder decodes runs of packets into RGB frames with a pool of
// libavcodec decoder contexts: a context is opened for a stream's codec,
// size, configuration record and reorder depth, reused for later runs of
// streams alike (reset between runs as a seek resets it), and closed
// when more than MaxIdle wait or the Decoder closes. Every context holds
// a reservation of its Footprint from Options.Budget, in use or idle.
// Safe for concurrent use: each Decode takes a context of its own.
type Decoder struct {
	opt Options

	mu     sync.Mutex
	idle   []*pooled // least recently used first
	closed bool

	live, opened, reused, runs, frames, served, skipped atomic.Int64
}

type pooled struct {
	key     string
	c       codecContext
	release func()
	rgb     []byte
}

// NewDecoder returns a Decoder with opt.
func NewDecoder(opt Options) *Decoder {
	opt.Frames = opt.Frames.WithDefaults()
	if opt.MaxIdle == 0 {
		opt.MaxIdle = runtime.GOMAXPROCS(0)
	}
	return &Decoder{opt: opt}
}

// Stats are a Decoder's counts.
type Stats struct {
	// Live is the decoder contexts open now, in use or idle; Idle those
	// waiting for reuse.
	Live, Idle int64
	// Opened and Reused count the contexts opened and the runs that
	// reused one.
	Opened, Reused int64
	// Runs, Frames and Served count the runs decoded, the frames the
	// decoders gave and those handed out; Skipped the disposable packets
	// of runs left undecoded, their frames unwanted.
	Runs, Frames, Served, Skipped int64
}

// Stats returns the counts now.
func (d *Decoder) Stats() Stats {
	d.mu.Lock()
	idle := int64(len(d.idle))
	d.mu.Unlock()
	return Stats{Live: d.live.Load(), Idle: idle, Opened: d.opened.Load(), Reused: d.reused.Load(),
		Runs: d.runs.Load(), Frames: d.frames.Load(), Served: d.served.Load(), Skipped: d.skipped.Load()}
}

// Footprint is Footprint with the Decoder's bound.
func (d *Decoder) Footprint(s Stream) (int64, error) { return Footprint(s, d.opt.Frames) }

// Close closes the idle contexts, and every context in use as its
// Decode returns. Decodes after Close fail.
func (d *Decoder) Close() {
	d.mu.Lock()
	d.closed = true
	idle := d.idle
	d.idle = nil
	d.mu.Unlock()
	for _, p := range idle {
		d.discard(p)
	}
}

// RunFigures are what one run's decode did: the packets sent to the
// decoder and those left out (disposable, their frames unwanted).
type RunFigures struct {
	Sent, Skipped int
}

// Decode is DecodeRun without its figures.
func (d *Decoder) Decode(ctx context.Context, run Run, want []int64, each func(Frame) error) error {
	_, err := d.DecodeRun(ctx, run, want, each)
	return err
}

// DecodeRun decodes the run and calls each, in the order the decoder gives
// them (presentation order), with every wanted frame (by PTS; a PTS
// wanted twice is handed out once). Each frame is decoded once, whatever
// number of clips want it. It sends the packets in decode order, drains
// the decoder at the run's end, and hands out a frame only if it is
// exactly what a decode of the whole stream would give (runFrames): a
// frame the run cannot give so is ErrRun before anything is decoded.
//
// Any decoding error, a frame flagged as damaged (except a leading
// picture the run does not give), a frame of another size than the
// stream's, a frame the index does not name or names twice, and a wanted
// frame the decoder did not give, is ErrDecode naming it: damaged packets
// never become wrong frames. (A damaged packet that still parses as valid
// bitstream decodes to other pixels without any decoder noticing; the
// store's checksums are what catch those.) An error from each stops the
// run and is returned as it is. ctx is checked between packets.
//
// A disposable packet (disposable.go) whose frame is not wanted is not
// sent (unless Options.DecodeDisposable): no other frame references it.
func (d *Decoder) DecodeRun(ctx context.Context, run Run, want []int64, each func(Frame) error) (RunFigures, error) {
	c, err := parseCodec(run.Stream.Codec)
	if err != nil {
		return RunFigures{}, err
	}
	s := run.Stream
	if err := checkSize(s, d.opt.Frames); err != nil {
		return RunFigures{}, err
	}
	at, exact, err := runFrames(run)
	if err != nil {
		return RunFigures{}, err
	}
	wanted := make(map[int64]bool, len(want))
	for _, pts := range want {
		i, ok := at[pts]
		if !ok {
			return RunFigures{}, fmt.Errorf("%w: no packet of the run has pts %d", ErrRun, pts)
		}
		if !exact[i] {
			return RunFigures{}, fmt.Errorf("%w: the frame of pts %d leads the run's first keyframe (pts %d) and needs the group before it (Cover plans it)", ErrRun, pts, run.Packets[0].PTS)
		}
		wanted[pts] = true
	}
	if !available {
		return RunFigures{}, fmt.Errorf("%w: cannot decode %s", ErrNoDecoder, c)
	}
	var skip []bool
	if rule := disposableRule(s, c); rule != nil && !d.opt.DecodeDisposable {
		skip = make([]bool, len(run.Packets))
		for i, pk := range run.Packets {
			skip[i] = !wanted[pk.PTS] && rule(pk.Data)
		}
	}
	reorder := max(reorderDepth(run.Packets), min(s.Reorder, 16))
	p, err := d.acquire(ctx, s, c, reorder)
	if err != nil {
		return RunFigures{}, err
	}
	d.runs.Add(1)
	f, err := d.decode(ctx, p, c, run, at, exact, wanted, skip, each)
	d.put(p, err == nil)
	d.skipped.Add(int64(f.Skipped))
	return f, err
}

func (d *Decoder) decode(ctx context.Context, p *pooled, c codec, run Run, at map[int64]int, exact []bool, wanted map[int64]bool, skip []bool, each func(Frame) error) (RunFigures, error) {
	var fig RunFigures
	err := d.decodeRun(ctx, p, c, run, at, exact, wanted, skip, each, &fig)
	return fig, err
}

func (d *Decoder) decodeRun(ctx context.Context, p *pooled, c codec, run Run, at map[int64]int, exact []bool, wanted map[int64]bool, skip []bool, each func(Frame) error, fig *RunFigures) error {
	s := run.Stream
	l := streamLayout(s, c)
	if !l.known {
		l = worstLayout
	}
	// The most a frame's planes may take: what Footprint counted.
	most := l.frameBytes(s.Width, s.Height)
	got := make([]bool, len(run.Packets))
	served := 0
	take := func() error {
		for {
			f, r, err := p.c.receive()
			if err != nil {
				return err
			}
			if r != recvFrame {
				return nil
			}
			d.frames.Add(1)
			i, ok := at[f.pts]
			if !ok {
				return fmt.Errorf("%w: the decoder gave a frame of pts %d, which no packet of the run has", ErrDecode, f.pts)
			}
			if got[i] {
				return fmt.Errorf("%w: the decoder gave the frame of pts %d twice", ErrDecode, f.pts)
			}
			got[i] = true
			if !exact[i] {
				continue // a leading picture without its references
			}
			if f.corrupt || f.errors != 0 {
				return fmt.Errorf("%w: the frame of pts %d (packet %d) decoded with errors (flags %#x; %q)", ErrDecode, f.pts, i, f.errors, f.said)
			}
			if f.width != s.Width || f.height != s.Height {
				return fmt.Errorf("%w: the frame of pts %d is %d×%d, the stream's are %d×%d", ErrDecode, f.pts, f.width, f.height, s.Width, s.Height)
			}
			if f.bytes > most {
				return fmt.Errorf("%w: the frame of pts %d is %s, more than the stream's configuration states (%s)", ErrDecode, f.pts, f.format, l)
			}
			if !wanted[f.pts] {
				continue
			}
			if err := p.c.rgb(p.rgb); err != nil {
				return err
			}
			served++
			d.served.Add(1)
			if err := each(Frame{PTS: f.pts, Packet: i, Width: f.width, Height: f.height, RGB: p.rgb, Format: f.format}); err != nil {
				return &callbackError{err}
			}
		}
	}
	for i := range run.Packets {
		if err := ctx.Err(); err != nil {
			return err
		}
		if skip != nil && skip[i] {
			fig.Skipped++
			continue
		}
		fig.Sent++
		if err := p.c.send(&run.Packets[i]); err != nil {
			return fmt.Errorf("packet %d (pts %d): %w", i, run.Packets[i].PTS, err)
		}
		if err := take(); err != nil {
			return unwrapCallback(fmt.Errorf("after packet %d (pts %d): %w", i, run.Packets[i].PTS, err), err)
		}
	}
	if err := p.c.send(nil); err != nil {
		return fmt.Errorf("draining: %w", err)
	}
	if err := take(); err != nil {
		return unwrapCallback(fmt.Errorf("draining: %w", err), err)
	}
	if served != len(wanted) {
		for pts := range wanted {
			if !got[at[pts]] {
				return fmt.Errorf("%w: the decoder gave no frame for pts %d (packet %d)", ErrDecode, pts, at[pts])
			}
		}
	}
	return nil
}

// callbackError carries an error from Decode's callback out unchanged.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// unwrapCallback returns the callback's own error if err came from it,
// else wrapped.
func unwrapCallback(wrapped, err error) error {
	if ce, ok := err.(*callbackError); ok {
		return ce.err
	}
	return wrapped
}

// poolKey names the contexts a run may reuse: same codec, size,
// configuration record and reorder depth give the same decoder state
// after a reset.
func poolKey(s Stream, c codec, reorder int) string {
	h := sha256.Sum256(s.Extradata)
	return fmt.Sprintf("%s/%dx%d/%d/%x", c, s.Width, s.Height, reorder, h[:12])
}

// acquire takes an idle context for the stream, or reserves a footprint
// and opens one. Idle contexts of other streams are closed to make room
// when the budget has none.
func (d *Decoder) acquire(ctx context.Context, s Stream, c codec, reorder int) (*pooled, error) {
	key := poolKey(s, c, reorder)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: the decoder is closed", ErrNoDecoder)
	}
	for i := len(d.idle) - 1; i >= 0; i-- {
		if p := d.idle[i]; p.key == key {
			d.idle = append(d.idle[:i], d.idle[i+1:]...)
			d.mu.Unlock()
			d.reused.Add(1)
			return p, nil
		}
	}
	d.mu.Unlock()

	n := footprint(s, c, reorder)
	release := func() {}
	if b := d.opt.Budget; b != nil {
		if n > b.Size() {
			return nil, fmt.Errorf("%w: decoding %d×%d %s takes up to %d bytes, more than the node's %d for decodes", ErrTooLarge, s.Width, s.Height, c, n, b.Size())
		}
		r, ok := b.TryReserve(n)
		if !ok {
			d.dropIdle()
			var err error
			if r, err = b.Reserve(ctx, n); err != nil {
				return nil, fmt.Errorf("reserving %d bytes to decode %d×%d %s: %w", n, s.Width, s.Height, c, err)
			}
		}
		release = r
	}
	cc, err := openCodec(s, c, d.opt.Frames.Pixels, reorder, enforcedFrames(s, c, reorder))
	if err != nil {
		release()
		return nil, err
	}
	d.live.Add(1)
	d.opened.Add(1)
	return &pooled{key: key, c: cc, release: release, rgb: make([]byte, s.Width*s.Height*3)}, nil
}

// put returns a context after a run: reset and kept for reuse if the run
// went well and there is room, else closed.
func (d *Decoder) put(p *pooled, ok bool) {
	if ok {
		p.c.reset()
		d.mu.Lock()
		if !d.closed && len(d.idle) < d.opt.MaxIdle {
			d.idle = append(d.idle, p)
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
	d.discard(p)
}

// dropIdle closes every idle context, giving back their reservations.
func (d *Decoder) dropIdle() {
	d.mu.Lock()
	idle := d.idle
	d.idle = nil
	d.mu.Unlock()
	for _, p := range idle {
		d.discard(p)
	}
}

func (d *Decoder) discard(p *pooled) {
	p.c.close()
	p.release()
	d.live.Add(-1)
}
