package tensorize

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/api"
	fvideo "github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/cache/gopcache"
	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

// A clip job's batch (api.Job.Clip) is decoded here too: its read is the
// GOPs its clips' frames need (and a LeRobot job's rows), each once; this
// stage decodes each video's GOPs once for every clip of the batch that
// names their frames (transform/video: Cover plans the runs, a pooled
// libavcodec context decodes them, Clips resamples each frame once per
// clip) and writes each clip as tar members:
//
//	KEY.frames.npy     uint8 (T, H, W, 3) (or the job's clip_layout): a tree's clip
//	KEY.{camera}.npy   the same, per camera window of a LeRobot sample
//	KEY.{column}.npy   a LeRobot data column: the window's rows stacked (T, ...), or the anchor's value
//	KEY.cls            a tree's clip's label (-1: its video has none)
//	KEY.json           the source: video, frame numbers, PTS, seconds, rows, padding
//
// Every member's size is known before any frame is decoded (the draws,
// the windows, the rows as read), so the batch takes its output from the
// copies at once, as a transformed batch does, and each video's frames
// are written into their places. The JSON members of a batch are padded
// with spaces to one length, so that a batch's samples are evenly spaced
// and a client views a batch's frames as one (B, T, H, W, 3) array
// without a copy.

// ErrClipInput marks a clip's input that is not what its index promised:
// a GOP sample without its .gop member, a packet outside the GOPs read.
// It wraps video.ErrDecode: the clip cannot be decoded.
var ErrClipInput = fmt.Errorf("%w: clip input", video.ErrDecode)

// ClipSample is one clip of a batch: its tar key, what package clips drew
// (its frames, GOPs, windows) and the key of its geometry's draws; and,
// for a clip of a job's order, its epoch position and the decode horizon
// it is in (nil: its GOPs are decoded for its batch alone).
type ClipSample struct {
	Key     string
	Clip    clips.Clip
	Draw    transform.Key
	Pos     int
	Horizon *gopcache.Horizon
}

// ClipRequest is one clip batch's work.
type ClipRequest struct {
	// Pipeline draws each clip's crop, size and flip (transform=); nil
	// serves the frames as decoded.
	Pipeline *transform.Pipeline
	Layout   video.Layout
	// Video is the dataset's decoder: its description, and a LeRobot
	// dataset's columns.
	Video *fvideo.Decoder
	Clips []ClipSample
	// GOPs are the GOP samples the clips need, as read (tar members);
	// Rows a LeRobot job's rows' samples, by global row.
	GOPs map[clips.GOP][]byte
	Rows map[int][]byte
	// NoWait takes the output's memory only if the budget has it now.
	NoWait bool
	// Place is the batch's place in the workers' queue (Place): a job's
	// earlier batches are decoded first.
	Place Place
	// Skip leaves out the clips of a video whose packets do not decode
	// (video.ErrDecode: a file damaged so that it still parses), named in
	// ClipOutput's Failed (their indexes in Clips, ascending; Errors
	// why), rather than fail the call: every clip of the
	// batch that needs that video's frames, as a clip of a chunk damaged
	// at rest is (gateway --on-damaged-chunk=skip).
	Skip bool
	// Missing is how many of the batch's clips were left out before the
	// call (their GOPs' chunks damaged or lost at rest, skip mode):
	// counted with those it leaves out in the stage's figures.
	Missing int
}

// ClipOutput is a clip call's samples, in order, in one buffer that
// counts against the copy budget until Release.
type ClipOutput struct {
	Output
	// Frames are the frames the clips hold; Decoded the frames of the
	// runs decoded (every packet from a run's keyframe to its last
	// wanted frame), Skipped those of them left undecoded (disposable,
	// unwanted: transform/video); GOPs the GOPs those runs passed
	// through. Hits are the GOPs taken from the decoded-GOP cache, Cached
	// the frames the clips took from it.
	Frames, Decoded, Skipped, GOPs, Hits, Cached int64
	CPU                                          time.Duration
}

// ClipFigures are the stage's clip figures since it started.
type ClipFigures struct {
	// GOPsRead and GOPBytes are the GOPs the calls were given (each once
	// a call) and their bytes; GOPs those their runs decoded. Skipped are
	// the clips left out of the batches made (ClipRequest.Missing and
	// Failed), counted as Clips are: a batch made ahead counts when made.
	Clips, Frames, Decoded, GOPs, GOPsRead, GOPBytes, Runs, Skipped int64
	// Disposable are the frames of runs left undecoded (ClipOutput's
	// Skipped); Hits and Cached the GOPs and frames taken from the
	// decoded-GOP cache.
	Disposable, Hits, Cached int64
	CPU                      time.Duration
}

// clipFigures are ClipFigures as counters.
type clipFigures struct {
	clips, frames, decoded, gops, gopsRead, gopBytes, runs, skipped, disposable, hits, cached, cpu atomic.Int64
}

// ClipFigures returns the stage's clip figures.
func (s *Stage) ClipFigures() ClipFigures {
	f := &s.clipFigures
	return ClipFigures{Clips: f.clips.Load(), Frames: f.frames.Load(), Decoded: f.decoded.Load(), GOPs: f.gops.Load(),
		GOPsRead: f.gopsRead.Load(), GOPBytes: f.gopBytes.Load(), Runs: f.runs.Load(), Skipped: f.skipped.Load(),
		Disposable: f.disposable.Load(), Hits: f.hits.Load(), Cached: f.cached.Load(), CPU: time.Duration(f.cpu.Load())}
}

// VideoDecoder names the video decoder this stage decodes with
// (transform/video.Build).
func (s *Stage) VideoDecoder() string { return video.Build() }

// VideoStats are the stage's clip figures for /stats, nil before its
// first clip.
func (s *Stage) VideoStats() *api.VideoStats {
	f := s.ClipFigures()
	if f.Clips == 0 && f.Skipped == 0 {
		return nil
	}
	d := s.video.Stats()
	c := s.frames.Stats()
	per := float64(max(f.Clips, 1))
	return &api.VideoStats{Decoder: video.Build(), Clips: f.Clips, Frames: f.Frames, GOPsRead: f.GOPsRead, GOPBytesRead: f.GOPBytes,
		GOPsDecoded: f.GOPs, FramesDecoded: f.Decoded, FramesLeftOut: f.Disposable, Runs: f.Runs, DecodeCPUSeconds: f.CPU.Seconds(),
		GOPBytesPerClip: float64(f.GOPBytes) / per, DecodeCPUPerClipMs: float64(f.CPU.Microseconds()) / 1e3 / per,
		FramesDecodedPerClip: float64(f.Decoded) / per,
		Contexts:             d.Live, IdleContexts: d.Idle, ContextsOpened: d.Opened, ContextsReused: d.Reused, ClipsSkipped: f.Skipped,
		GOPCache: &api.GOPCacheStats{Limit: c.Limit, Held: c.Held, PeakHeld: c.Peak, GOPs: c.Entries, Hits: f.Hits, FramesFromCache: f.Cached,
			Kept: c.Kept, Alone: c.Alone, Short: c.Short, Evicted: c.Evicted, Dropped: c.Dropped}}
}

// registerClips registers the clip figures' metrics.
func (s *Stage) registerClips(reg prometheus.Registerer) {
	f := &s.clipFigures
	counter := func(name, help string, v func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, v)
	}
	reg.MustRegister(
		counter("brand_video_clips_total", "Clips of clip jobs this node decoded and served (a batch's, a batch made ahead).",
			func() float64 { return float64(f.clips.Load()) }),
		counter("brand_video_frames_total", "Frames of those clips.", func() float64 { return float64(f.frames.Load()) }),
		counter("brand_video_gops_read_total", "GOPs the clips' batches read (from the cache, the disk tier, peers or the store), each once a batch.",
			func() float64 { return float64(f.gopsRead.Load()) }),
		counter("brand_video_gops_decoded_total", "GOPs the clips' runs decoded (a GOP of an open GOP's leading frames counted with it).",
			func() float64 { return float64(f.gops.Load()) }),
		counter("brand_video_gop_bytes_read_total", "Bytes of those GOPs: over brand_video_clips_total, the bytes a clip reads.",
			func() float64 { return float64(f.gopBytes.Load()) }),
		counter("brand_video_frames_decoded_total", "Frames of the runs decoded for the clips: every packet of every run, from its keyframe to its last wanted frame.",
			func() float64 { return float64(f.decoded.Load()) }),
		counter("brand_video_frames_left_out_total", "Frames of those runs left undecoded: disposable (no later frame references them) and wanted by no clip.",
			func() float64 { return float64(f.disposable.Load()) }),
		counter("brand_video_gop_cache_hits_total", "GOPs a batch took from the decoded-GOP cache, decoded for an earlier batch of its horizon.",
			func() float64 { return float64(f.hits.Load()) }),
		counter("brand_video_frames_from_cache_total", "Frames the clips took from the decoded-GOP cache.",
			func() float64 { return float64(f.cached.Load()) }),
		counter("brand_video_clips_skipped_total", "Clips left out of batches (--on-damaged-chunk=skip): a GOP they need is of a chunk damaged or lost at rest, or their video's packets do not decode.",
			func() float64 { return float64(f.skipped.Load()) }),
		counter("brand_video_decode_runs_total", "Runs of packets decoded (each from a keyframe, once a batch however many clips want its frames).",
			func() float64 { return float64(f.runs.Load()) }),
		counter("brand_video_decode_cpu_seconds_total", "Thread CPU time of the clips' decodes, conversions and resamples.",
			func() float64 { return time.Duration(f.cpu.Load()).Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_video_decoder_contexts",
			Help: "libavcodec decoder contexts open on this node, in use or idle, each holding its footprint of the decodes' memory."},
			func() float64 { return float64(s.video.Stats().Live) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_video_gop_cache_bytes",
			Help: "Bytes of decoded frames the decoded-GOP cache holds, of the node's decodes (at most --gop-cache-bytes)."},
			func() float64 { return float64(s.frames.Stats().Held) }),
	)
}

// clipMember is one member of a clip sample's output.
type clipMember struct {
	name   string
	header []byte
	size   int    // the data's bytes
	data   []byte // the data, for members made before decoding (nil: frames)
	off    int    // where its data starts in the buffer
}

// videoWork is one video's share of a call: its clips, each clip's
// member, decoded in one task.
type videoWork struct {
	video int
	clips []video.Clip
	slots []*clipMember // per clip: the member its frames go into
}

// Clips decodes req's clips into their members (see above). On error
// nothing is held.
func (s *Stage) Clips(ctx context.Context, req ClipRequest) (*ClipOutput, error) {
	d := req.Video.Dataset()
	gops := make(map[clips.GOP][]byte, len(req.GOPs))
	var gopBytes int64
	for g, smp := range req.GOPs {
		m, err := memberData(smp, ".gop")
		if err != nil {
			return nil, fmt.Errorf("%w: GOP %d of %s: %w", ErrClipInput, g.GOP, d.Videos[g.Video].Key, err)
		}
		gops[g] = m
		gopBytes += int64(len(m))
	}
	var cols []fvideo.Column
	if d.LeRobot != nil {
		cols = req.Video.Columns()
	}
	members := make([][]*clipMember, len(req.Clips))
	work := map[int]*videoWork{}
	addFrames := func(i int, name string, frames []clips.Frame) error {
		if len(frames) == 0 {
			return nil
		}
		v := frames[0].Video
		st := streamOf(d, v)
		vc := video.Clip{Key: req.Clips[i].Draw}
		for _, f := range frames {
			if f.Video != v {
				return fmt.Errorf("%w: a clip's frames in two videos", ErrClipInput)
			}
			vc.Frames = append(vc.Frames, f.PTS)
		}
		n, err := video.Size(req.Pipeline, st, vc, req.Layout)
		if err != nil {
			return err
		}
		m := &clipMember{name: req.Clips[i].Key + "." + name, size: n}
		members[i] = append(members[i], m)
		w := work[v]
		if w == nil {
			w = &videoWork{video: v}
			work[v] = w
		}
		w.clips = append(w.clips, vc)
		w.slots = append(w.slots, m)
		return nil
	}
	jsons := make([][]byte, len(req.Clips))
	for i, cs := range req.Clips {
		c := cs.Clip
		if d.LeRobot == nil {
			if err := addFrames(i, "frames.npy", c.Frames); err != nil {
				return nil, err
			}
			// Every clip has its label, -1 for none: a batch's samples
			// have one set of members.
			lbl := []byte(strconv.Itoa(c.Label))
			members[i] = append(members[i], &clipMember{name: cs.Key + ".cls", size: len(lbl), data: lbl})
		} else {
			for _, st := range c.Streams {
				if st.Camera {
					if err := addFrames(i, st.Key+".npy", st.Frames); err != nil {
						return nil, err
					}
				}
			}
			arrays, err := columnArrays(c, cols, req.Rows, cs.Key)
			if err != nil {
				return nil, err
			}
			members[i] = append(members[i], arrays...)
		}
		js, err := clipJSON(d, c)
		if err != nil {
			return nil, err
		}
		jsons[i] = js
	}
	// One length for every JSON member of the batch: evenly spaced samples.
	most := 0
	for _, js := range jsons {
		most = max(most, len(js))
	}
	for i, js := range jsons {
		js = append(js, bytes.Repeat([]byte{' '}, most-len(js))...)
		members[i] = append(members[i], &clipMember{name: req.Clips[i].Key + ".json", size: len(js), data: js})
	}
	// Sizes, headers and places.
	var total int64
	for _, ms := range members {
		for _, m := range ms {
			h, err := memberHeader(m.name, m.size)
			if err != nil {
				return nil, fmt.Errorf("%w: member %q: %w", ErrClipInput, m.name, err)
			}
			m.header = h
			m.off = int(total) + len(h)
			total += int64(len(h) + m.size + pad(m.size))
		}
	}
	if total > s.maxBytes {
		return nil, fmt.Errorf("%w: %d clips make %d bytes, over the server's --max-batch-bytes (%d)", ErrTooLarge, len(req.Clips), total, s.maxBytes)
	}
	buf, release, err := s.buffer(ctx, total, req.NoWait)
	if err != nil {
		return nil, err
	}
	buf = buf[:total]
	for _, ms := range members {
		for _, m := range ms {
			copy(buf[m.off-len(m.header):], m.header)
			if m.data != nil {
				copy(buf[m.off:], m.data)
			}
			clear(buf[m.off+m.size : m.off+m.size+pad(m.size)])
		}
	}
	// Each video's clips decoded in one task, on the stage's workers.
	tasks := make([]*videoWork, 0, len(work))
	for _, w := range work {
		tasks = append(tasks, w)
	}
	sort.Slice(tasks, func(a, b int) bool { return tasks[a].video < tasks[b].video })
	// The decoded-GOP cache decides for every GOP the batch wants at once,
	// in the plan's order, and the batch's samples are served to it then
	// (gopcache.Cache.Decide): what a node decodes is what /plan said,
	// however the videos' tasks run.
	entries := map[int][]Entry{}
	var wants []gopcache.Want
	for _, e := range Entries(d, req.Clips) {
		entries[e.Key.Video] = append(entries[e.Key.Video], e)
		if e.Horizon != nil {
			can := Decodable(d, e.Key.Video, func(g clips.GOP) bool { _, ok := gops[g]; return ok })
			wants = append(wants, gopcache.Want{Horizon: e.Horizon, Key: e.Key, Own: e.Own, Can: can, FrameBytes: e.FrameBytes})
		}
	}
	served := map[*gopcache.Horizon][]int{}
	for _, c := range req.Clips {
		if c.Horizon != nil {
			served[c.Horizon] = append(served[c.Horizon], c.Pos)
		}
	}
	// Decided as the batch's tasks are queued, under the queue's lock, so
	// that the workers take batches' tasks in the order their GOPs were
	// decided, and each kept fill's task is known taken (Lease.Start)
	// before any later batch's task runs: a later batch waits for that
	// fill rather than decode the GOP again (Lease.Wait).
	leases := map[gopcache.Key]*gopcache.Lease{}
	defer func() {
		for _, l := range leases {
			l.Close()
		}
	}()
	decide := func() {
		for i, l := range s.frames.Decide(wants, served) {
			leases[wants[i].Key] = l
		}
	}
	taken := func(i int) {
		for _, e := range entries[tasks[i].video] {
			if l := leases[e.Key]; l != nil {
				l.Start()
			}
		}
	}
	errs := make([]error, len(tasks))
	figs := make([]taskFigures, len(tasks))
	err = s.pool.runCalls(ctx, calls{place: req.Place, n: len(tasks), queued: decide, taken: taken, f: func(i int, _ *transform.Scratch) {
		figs[i], errs[i] = s.decodeVideo(ctx, req, d, gops, tasks[i], entries[tasks[i].video], leases, buf, req.NoWait)
	}})
	failed := map[*clipMember]error{} // the frames' members of the videos that did not decode
	if err == nil && req.Skip {
		for i, e := range errs {
			if errors.Is(e, video.ErrDecode) {
				for _, m := range tasks[i].slots {
					failed[m] = e
				}
				errs[i] = nil
			}
		}
	}
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		release()
		return nil, err
	}
	out := &ClipOutput{Output: Output{Bytes: total, release: release}}
	at := 0
	for i, ms := range members {
		n := 0
		var bad error
		for _, m := range ms {
			n += len(m.header) + m.size + pad(m.size)
			if e, ok := failed[m]; ok && bad == nil {
				bad = e
			}
		}
		if bad != nil {
			out.Failed, out.Errors = append(out.Failed, i), append(out.Errors, bad)
			out.Bytes -= int64(n)
		} else {
			out.Parts = append(out.Parts, buf[at:at+n:at+n])
		}
		at += n
	}
	for _, f := range figs {
		out.Frames += f.frames
		out.Decoded += f.decoded
		out.Skipped += f.skipped
		out.GOPs += f.gops
		out.Hits += f.hits
		out.Cached += f.cached
		out.CPU += f.cpu
		s.clipFigures.runs.Add(f.runs)
	}
	cf := &s.clipFigures
	cf.skipped.Add(int64(req.Missing + len(out.Failed)))
	cf.clips.Add(int64(len(req.Clips) - len(out.Failed)))
	cf.frames.Add(out.Frames)
	cf.decoded.Add(out.Decoded)
	cf.disposable.Add(out.Skipped)
	cf.hits.Add(out.Hits)
	cf.cached.Add(out.Cached)
	cf.gops.Add(out.GOPs)
	cf.gopBytes.Add(gopBytes)
	cf.gopsRead.Add(int64(len(gops)))
	cf.cpu.Add(int64(out.CPU))
	return out, nil
}

// taskFigures are what one video's decode did.
type taskFigures struct {
	frames, decoded, skipped, gops, runs, hits, cached int64
	cpu                                                time.Duration
}

// decodeVideo decodes the frames w's clips name from the GOPs read and
// writes each clip into its member's place in buf: GOP by GOP (entries,
// in Entries' order), each taken from the decoded-GOP cache or decoded —
// the frames its horizon's samples not yet served want when the cache
// keeps it, the batch's own else.
func (s *Stage) decodeVideo(ctx context.Context, req ClipRequest, d *fvideo.Dataset, gops map[clips.GOP][]byte, w *videoWork, entries []Entry, leases map[gopcache.Key]*gopcache.Lease, buf []byte, noWait bool) (taskFigures, error) {
	var f taskFigures
	vid := &d.Videos[w.video]
	t := &vid.Track
	st := s.stream(d, w.video)
	dst := make([][]byte, len(w.slots))
	for i, m := range w.slots {
		dst[i] = buf[m.off : m.off : m.off+m.size]
	}
	cl, err := video.NewClips(req.Pipeline, st, w.clips, req.Layout, dst)
	if err != nil {
		return f, fmt.Errorf("%s: %w", vid.Key, err)
	}
	if work := cl.Work(); work > 0 {
		release, ok := s.decodes.TryReserve(work)
		if !ok {
			// Batches decided after this one wait for the GOPs it keeps
			// (Lease.Start): not while it waits for memory.
			for _, e := range entries {
				if l := leases[e.Key]; l != nil {
					l.Forgo()
				}
			}
			if release, err = s.reserve(noWait)(ctx, work); err != nil {
				return f, err
			}
		}
		defer release()
	}
	wanted := map[int64]bool{}
	for _, pts := range cl.Want() {
		wanted[pts] = true
	}
	put := map[int64]bool{} // a frame two horizons' GOPs hold is put once
	give := func(fr video.Frame) error {
		if !wanted[fr.PTS] || put[fr.PTS] {
			return nil
		}
		put[fr.PTS] = true
		return cl.Put(fr)
	}
	// The GOPs this task fills for later batches first, claimed now:
	// those batches wait for a fill under way, which waits on nothing;
	// then the GOPs earlier batches fill (gopcache.Lease.Wait).
	for _, e := range entries {
		if l := leases[e.Key]; l != nil {
			l.Claim() // false: another batch's task claimed it first; a hit on its fill
		}
	}
	entries = slices.Clone(entries)
	slices.SortStableFunc(entries, func(a, b Entry) int {
		return cmp.Compare(keeps(leases[b.Key]), keeps(leases[a.Key]))
	})
	can := Decodable(d, w.video, func(g clips.GOP) bool { _, ok := gops[g]; return ok })
	var derr error
	f.cpu = transform.ThreadCPU(func() {
		for _, e := range entries {
			l := leases[e.Key]
			if e.Horizon == nil || l == nil {
				l = &gopcache.Lease{Decode: ownFrames(e.Own)}
			}
			var held bool
			if held, derr = l.Wait(ctx, can); derr != nil {
				return
			}
			if held {
				for _, pts := range ownFrames(e.Own) {
					rgb := l.Frame(pts)
					if rgb == nil {
						derr = fmt.Errorf("%w: %s: GOP %d held without frame %d", ErrClipInput, vid.Key, e.Key.GOP, pts)
						break
					}
					if derr = give(video.Frame{PTS: pts, Width: t.Width, Height: t.Height, RGB: rgb}); derr != nil {
						break
					}
					f.cached++
				}
				l.Release()
				f.hits++
				if derr != nil {
					return
				}
				continue
			}
			derr = s.fill(ctx, vid, w.video, st, gops, e.Key.GOP, l, give, &f)
			l.Done(derr)
			if derr != nil {
				return
			}
		}
	})
	if derr != nil {
		return f, derr
	}
	if _, err := cl.Out(); err != nil {
		return f, fmt.Errorf("%s: %w", vid.Key, err)
	}
	for _, c := range w.clips {
		f.frames += int64(len(c.Frames))
	}
	return f, nil
}

// keeps is 1 for a lease that fills a GOP for later batches, else 0.
func keeps(l *gopcache.Lease) int {
	if l != nil && l.Keeps() {
		return 1
	}
	return 0
}

// fill decodes the frames lease l says of GOP g of video v (FillRuns'
// runs), each frame handed to give and, when the cache keeps them, put
// in the lease.
func (s *Stage) fill(ctx context.Context, vid *fvideo.Video, v int, st video.Stream, gops map[clips.GOP][]byte, g int, l *gopcache.Lease, give func(video.Frame) error, f *taskFigures) error {
	t := &vid.Track
	spans, err := FillRuns(t, g, l.Decode)
	if err != nil {
		return fmt.Errorf("%s: %w", vid.Key, err)
	}
	each := func(fr video.Frame) error {
		if l.Keeps() {
			if err := l.Put(fr.PTS, fr.RGB); err != nil {
				return err
			}
		}
		return give(fr)
	}
	for _, sp := range spans {
		run := video.Run{Stream: st, First: sp.First}
		var want []int64
		for i := sp.Start; i < sp.End; i++ {
			gi := gopOf(t, i)
			member, ok := gops[clips.GOP{Video: v, GOP: gi}]
			if !ok {
				return fmt.Errorf("%w: %s: sample %d is in GOP %d, which was not read", ErrClipInput, vid.Key, i, gi)
			}
			data, err := vid.GOPSample(gi, i, member)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", ErrClipInput, vid.Key, err)
			}
			smp := t.Samples[i]
			run.Packets = append(run.Packets, video.Packet{PTS: smp.PTS, DTS: smp.DTS, Key: smp.Key, Data: data})
			if _, ok := slices.BinarySearch(l.Decode, smp.PTS); ok {
				want = append(want, smp.PTS)
			}
		}
		fig, err := s.video.DecodeRun(ctx, run, want, each)
		if err != nil {
			return fmt.Errorf("%s: %w", vid.Key, err)
		}
		f.runs++
		f.decoded += int64(len(run.Packets))
		f.skipped += int64(fig.Skipped)
		f.gops += int64(SpanGOPs(t, sp))
	}
	return nil
}

// ownFrames are the frames uses want, ascending, each once.
func ownFrames(uses []gopcache.Use) []int64 {
	var out []int64
	for _, u := range uses {
		out = append(out, u.Frames...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// gopOf is the GOP of the track's sample i (decode order).
func gopOf(t *mp4.Track, i int) int {
	return sort.Search(len(t.GOPs), func(g int) bool { return int(t.GOPs[g].End) > i })
}

// streamOf is what the decoder needs of video v.
func streamOf(d *fvideo.Dataset, v int) video.Stream {
	t := &d.Videos[v].Track
	return video.Stream{Codec: t.Codec, Width: t.Width, Height: t.Height, Extradata: t.Extradata, Rotation: t.Rotation}
}

// maxReorders bounds the tracks whose reorder depth a stage keeps.
const maxReorders = 1 << 14

// stream is streamOf with the track's reorder depth from its index
// (video.Stream.Reorder), computed once a track (a dataset version's
// tracks are immutable), so that every run of a stream, whatever its
// length, reuses one pooled decoder context.
func (s *Stage) stream(d *fvideo.Dataset, v int) video.Stream {
	st := streamOf(d, v)
	t := &d.Videos[v].Track
	if r, ok := s.reorders.Get(t); ok {
		st.Reorder = r
		return st
	}
	infos := make([]video.PacketInfo, len(t.Samples))
	for i, smp := range t.Samples {
		infos[i] = video.PacketInfo{PTS: smp.PTS, DTS: smp.DTS, Key: smp.Key}
	}
	st.Reorder = video.ReorderDepth(infos)
	s.reorders.Add(t, st.Reorder)
	return st
}

// columnArrays are a LeRobot sample's column members: each column a
// window reads, its rows stacked; every other, the anchor row's value. A
// column whose values are no array (ErrColumn) is left out.
func columnArrays(c clips.Clip, cols []fvideo.Column, rows map[int][]byte, key string) ([]*clipMember, error) {
	var out []*clipMember
	for _, col := range cols {
		var rs [][]byte
		stack := false
		for _, st := range c.Streams {
			if st.Key == col.Name && !st.Camera {
				stack = true
				for _, r := range st.Rows {
					rs = append(rs, rows[r])
				}
			}
		}
		if !stack {
			rs = [][]byte{rows[c.Row]}
		}
		for _, r := range rs {
			if r == nil {
				return nil, fmt.Errorf("%w: a row of sample %s was not read", ErrClipInput, key)
			}
		}
		arr, err := fvideo.ColumnArray(col, rs, stack)
		if errors.Is(err, fvideo.ErrColumn) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &clipMember{name: key + "." + col.Name + ".npy", size: len(arr), data: arr})
	}
	return out, nil
}

// clipJSON is a clip's .json member: where its frames come from.
func clipJSON(d *fvideo.Dataset, c clips.Clip) ([]byte, error) {
	type frames struct {
		Video   string    `json:"video"`
		Frames  []int     `json:"frames"`
		PTS     []int64   `json:"pts"`
		Seconds []float64 `json:"seconds"`
		// TimeBase is the PTS's unit, 1/timescale of a second.
		TimeBase [2]int64 `json:"time_base"`
		Rotation int      `json:"rotation"`
	}
	of := func(fs []clips.Frame) frames {
		if len(fs) == 0 {
			return frames{}
		}
		v := &d.Videos[fs[0].Video]
		out := frames{Video: v.Key, TimeBase: [2]int64{1, int64(v.Track.Timescale)}, Rotation: v.Track.Rotation}
		for _, f := range fs {
			out.Frames = append(out.Frames, f.Frame)
			out.PTS = append(out.PTS, f.PTS)
			out.Seconds = append(out.Seconds, f.Seconds)
		}
		return out
	}
	if d.LeRobot == nil {
		return json.Marshal(struct {
			Sample  int `json:"sample"`
			Segment int `json:"segment"`
			Label   int `json:"label"`
			frames
		}{c.Sample, c.Segment, c.Label, of(c.Frames)})
	}
	type window struct {
		Rows []int  `json:"rows"`
		Pad  []bool `json:"pad"`
		*frames
	}
	l := d.LeRobot
	ws := map[string]window{}
	for _, st := range c.Streams {
		w := window{Rows: st.Rows, Pad: st.Pad}
		if st.Camera {
			fr := of(st.Frames)
			w.frames = &fr
		}
		ws[st.Key] = w
	}
	return json.Marshal(struct {
		Row       int               `json:"row"`
		Episode   int               `json:"episode"`
		Timestamp float32           `json:"timestamp"`
		Windows   map[string]window `json:"windows"`
	}{c.Row, l.Episodes[c.Episode].Index, l.Timestamps[c.Row], ws})
}

// memberHeader is the tar header blocks of a member of the stage's own:
// mode 0644, no owner, no time, so that every node writes the same
// bytes; USTAR, or PAX for a name USTAR cannot hold (ustar.Any).
func memberHeader(name string, size int) ([]byte, error) {
	return ustar.AppendHeader(nil, ustar.Header{Name: name, Size: int64(size), Mode: 0o644, Format: ustar.Any})
}

// memberData is the data of a sample's member whose name ends with ext,
// a slice of sample, not a copy.
func memberData(sample []byte, ext string) ([]byte, error) {
	c := &counter{r: bytes.NewReader(sample)}
	tr := tar.NewReader(c)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s member", ext)
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg && len(h.Name) >= len(ext) && h.Name[len(h.Name)-len(ext):] == ext {
			if int64(c.n)+h.Size > int64(len(sample)) {
				return nil, fmt.Errorf("member %q ends past its sample", h.Name)
			}
			return sample[c.n : c.n+int(h.Size) : c.n+int(h.Size)], nil
		}
	}
}
