package tensorize

import (
	"cmp"
	"fmt"
	"slices"

	fvideo "github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/cache/gopcache"
	"github.com/brandgw/brand/transform/video"
)

// A clip job's GOPs are decoded once a decode horizon (gopcache): each
// frame a batch's clips want belongs to the GOP of its own sample, and a
// batch takes each GOP its clips want from the node's decoded-GOP cache,
// or decodes it — every frame the horizon's samples not yet served want
// of it, up to the last, when the cache keeps it for them; the batch's
// own frames else. The clip unit's plan serves an epoch's batches
// through a gopcache.Book with the functions below, so that /plan counts
// the GOPs and frames this stage decodes by the rule it decodes them by.

// GOPFrames are the frames clip c wants of each GOP (by video and the GOP
// of each frame's own sample), PTS ascending, each once.
func GOPFrames(d *fvideo.Dataset, c clips.Clip) map[clips.GOP][]int64 {
	out := map[clips.GOP][]int64{}
	note := func(fs []clips.Frame) {
		for _, f := range fs {
			g := clips.GOP{Video: f.Video, GOP: int(d.Videos[f.Video].Track.Frames[f.Frame].GOP)}
			out[g] = append(out[g], f.PTS)
		}
	}
	note(c.Frames)
	for _, st := range c.Streams {
		if st.Camera {
			note(st.Frames)
		}
	}
	for g, pts := range out {
		slices.Sort(pts)
		out[g] = slices.Compact(pts)
	}
	return out
}

// Entry is one GOP a batch's clips want decoded, as one horizon's: the
// cache's key, the horizon (nil: the batch's own, never kept), the
// batch's uses of it, and the bytes of one of its frames.
type Entry struct {
	Key        gopcache.Key
	Horizon    *gopcache.Horizon
	Own        []gopcache.Use
	FrameBytes int64
}

// Entries are the GOPs the clips cs want decoded, in the order the stage
// takes them: by video, then by horizon (its first position; the
// batch's own last), then by GOP.
func Entries(d *fvideo.Dataset, cs []ClipSample) []Entry {
	type at struct {
		video, start, gop int
		id                string
	}
	byKey := map[at]*Entry{}
	for i, c := range cs {
		h, pos, id, start := c.Horizon, c.Pos, "", int(^uint(0)>>1)
		if h != nil {
			id, start = h.ID, h.Start
		} else {
			pos = i
		}
		for g, pts := range GOPFrames(d, c.Clip) {
			k := at{g.Video, start, g.GOP, id}
			e := byKey[k]
			if e == nil {
				t := &d.Videos[g.Video].Track
				e = &Entry{Key: gopcache.Key{Horizon: id, Video: g.Video, GOP: g.GOP}, Horizon: h, FrameBytes: int64(t.Width) * int64(t.Height) * 3}
				byKey[k] = e
			}
			e.Own = append(e.Own, gopcache.Use{Pos: pos, Frames: pts})
		}
	}
	keys := make([]at, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b at) int {
		return cmp.Or(cmp.Compare(a.video, b.video), cmp.Compare(a.start, b.start), cmp.Compare(a.id, b.id), cmp.Compare(a.gop, b.gop))
	})
	out := make([]Entry, len(keys))
	for i, k := range keys {
		out[i] = *byKey[k]
	}
	return out
}

// Decodable says which frames of video v's GOPs a batch that read gops
// can decode: a frame's own GOP, and for an open GOP's leading picture
// the GOP before.
func Decodable(d *fvideo.Dataset, v int, gops func(clips.GOP) bool) func(pts int64) bool {
	t := &d.Videos[v].Track
	return func(pts int64) bool {
		i, ok := slices.BinarySearchFunc(t.Frames, pts, func(f mp4.Frame, pts int64) int { return cmp.Compare(f.PTS, pts) })
		if !ok {
			return false
		}
		g := int(t.Frames[i].GOP)
		if !gops(clips.GOP{Video: v, GOP: g}) {
			return false
		}
		return !leading(t, g, pts) || gops(clips.GOP{Video: v, GOP: g - 1})
	}
}

// leading reports whether the frame of pts in GOP g is shown before the
// GOP's keyframe (an open GOP's leading picture), which is decoded from
// the GOP before.
func leading(t *mp4.Track, g int, pts int64) bool {
	return g > 0 && t.GOPs[g].Leading && pts < t.Samples[t.GOPs[g].First].PTS
}

// FillRuns are the runs (spans of the track's samples, decode order) that
// decode frames of GOP g, from its keyframe (the one before for a leading
// picture) to the last of them: what a fill of the GOP decodes.
func FillRuns(t *mp4.Track, g int, frames []int64) ([]video.Span, error) {
	from := g
	for _, pts := range frames {
		if leading(t, g, pts) {
			from = g - 1
		}
	}
	first, end := int(t.GOPs[from].First), int(t.GOPs[g].End)
	infos := make([]video.PacketInfo, end-first)
	for i := range infos {
		s := t.Samples[first+i]
		infos[i] = video.PacketInfo{PTS: s.PTS, DTS: s.DTS, Key: s.Key}
	}
	spans, err := video.Cover(infos, frames)
	if err != nil {
		return nil, fmt.Errorf("GOP %d: %w", g, err)
	}
	for i := range spans {
		spans[i].Start += first
		spans[i].End += first
		spans[i].First = spans[i].Start == 0
	}
	return spans, nil
}

// SpanGOPs is how many GOPs span sp of track t passes through.
func SpanGOPs(t *mp4.Track, sp video.Span) int {
	return gopOf(t, sp.End-1) - gopOf(t, sp.Start) + 1
}
