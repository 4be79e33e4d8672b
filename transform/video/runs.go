package video

import (
	"fmt"
	"slices"
)

// PacketInfo is what an index keeps of a packet: its timestamps and
// whether it is a keyframe, in decode order.
type PacketInfo struct {
	PTS, DTS int64
	Key      bool
}

// Span is a run to decode: packets [Start, End) of a stream in decode
// order. First is Start == 0: the start of a whole-stream decode.
type Span struct {
	Start, End int
	First      bool
}

// Cover plans the runs that give every wanted frame (by PTS) exactly as
// a decode of the whole stream from its first packet would: for each
// frame, from the keyframe at or before it in decode order to the frame's
// own packet; from the keyframe before that one when the frame is a
// leading picture (shown before the keyframe it follows, as in an open
// GOP: its references are in the group before); spans that overlap or
// touch merged into one run, so a group is decoded once for every frame
// wanted of it. Runs end at the last wanted frame's packet: the decoder
// is drained there, and no frame's pixels depend on packets after its
// own.
//
// Refused with ErrRun: a PTS not in the index or given to two packets, a
// frame before the stream's first keyframe (a decoder gives such frames
// only from references it does not have), and a leading picture of a
// first keyframe that follows frames that are not keyframes.
func Cover(packets []PacketInfo, want []int64) ([]Span, error) {
	at := make(map[int64]int, len(packets))
	for i, p := range packets {
		if _, dup := at[p.PTS]; dup {
			return nil, fmt.Errorf("%w: packets %d and %d have one pts %d", ErrRun, at[p.PTS], i, p.PTS)
		}
		at[p.PTS] = i
	}
	// key[i] is the last keyframe at or before packet i, or -1.
	key := make([]int, len(packets))
	k := -1
	for i, p := range packets {
		if p.Key {
			k = i
		}
		key[i] = k
	}
	var spans []Span
	for _, pts := range want {
		i, ok := at[pts]
		if !ok {
			return nil, fmt.Errorf("%w: no frame has pts %d", ErrRun, pts)
		}
		k := key[i]
		if k < 0 {
			return nil, fmt.Errorf("%w: the frame of pts %d precedes the stream's first keyframe", ErrRun, pts)
		}
		if pts < packets[k].PTS && k > 0 {
			// A leading picture: decode from the keyframe before.
			if key[k-1] < 0 {
				return nil, fmt.Errorf("%w: the frame of pts %d leads the stream's first keyframe, which follows frames that are not keyframes", ErrRun, pts)
			}
			k = key[k-1]
		}
		spans = append(spans, Span{Start: k, End: i + 1})
	}
	slices.SortFunc(spans, func(a, b Span) int { return a.Start - b.Start })
	var out []Span
	for _, s := range spans {
		if n := len(out); n > 0 && s.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, s.End)
			continue
		}
		out = append(out, s)
	}
	for i := range out {
		out[i].First = out[i].Start == 0
	}
	return out, nil
}

// runFrames checks a run and returns the packet index of every PTS, and
// which packets' frames the run gives exactly: all of them but the
// leading pictures of its first keyframe (shown before it), unless the
// run starts the stream.
func runFrames(r Run) (map[int64]int, []bool, error) {
	if len(r.Packets) == 0 {
		return nil, nil, fmt.Errorf("%w: an empty run", ErrRun)
	}
	if !r.Packets[0].Key {
		return nil, nil, fmt.Errorf("%w: the run starts at packet pts %d, not a keyframe", ErrRun, r.Packets[0].PTS)
	}
	at := make(map[int64]int, len(r.Packets))
	exact := make([]bool, len(r.Packets))
	k0 := r.Packets[0].PTS
	for i, p := range r.Packets {
		if _, dup := at[p.PTS]; dup {
			return nil, nil, fmt.Errorf("%w: packets %d and %d have one pts %d", ErrRun, at[p.PTS], i, p.PTS)
		}
		at[p.PTS] = i
		exact[i] = r.First || p.PTS >= k0
	}
	return at, exact, nil
}

// ReorderDepth is the reorder depth of a stream whose packets, in decode
// order, are infos (reorderDepth's): what Stream.Reorder says, from the
// index alone.
func ReorderDepth(infos []PacketInfo) int {
	ps := make([]Packet, len(infos))
	for i, p := range infos {
		ps[i].PTS = p.PTS
	}
	return reorderDepth(ps)
}

// reorderDepth is the most frames that precede a frame in decode order
// and follow it in presentation order: the delay a decoder needs to give
// the run's frames in order (H.264's num_reorder_frames). libavformat
// gives PyAV's decoder the stream's (video_delay); a decoder given less
// may drop frames it finds out of order, one given more only waits
// longer.
func reorderDepth(ps []Packet) int {
	depth := 0
	for i := range ps {
		n := 0
		// No codec here reorders by more than 16 frames, so 64 back
		// is enough and keeps a long run linear.
		for j := max(i-64, 0); j < i; j++ {
			if ps[j].PTS > ps[i].PTS {
				n++
			}
		}
		depth = max(depth, n)
	}
	return min(depth, 16)
}
