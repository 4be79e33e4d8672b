package mp4

// editShape checks that the edit list is one Brand applies — at most one
// empty edit, then one edit of media — and returns the empty edit's
// duration in the media's timescale and the edit of media. An empty list
// is no edit (ok false).
func editShape(edits []Edit, movieScale, mediaScale uint32) (empty int64, ed Edit, ok bool, err error) {
	if len(edits) == 0 {
		return 0, Edit{}, false, nil
	}
	if movieScale == 0 {
		return 0, Edit{}, false, errorf(ErrInvalid, "the video track has an edit list and the movie (mvhd) no timescale")
	}
	for i, e := range edits {
		switch {
		case e.MediaTime < -1:
			return 0, Edit{}, false, errorf(ErrInvalid, "edit %d of the video track starts at media time %d", i, e.MediaTime)
		case e.MediaTime == -1 && i == 0:
			d, fits := rescale(e.Duration, int64(mediaScale), int64(movieScale))
			if !fits || d > 1<<62 {
				return 0, Edit{}, false, errorf(ErrInvalid, "edit %d of the video track lasts %d", i, e.Duration)
			}
			empty = d
		case ok || e.MediaTime == -1:
			return 0, Edit{}, false, errorf(ErrUnsupported, "the video track's edit list has %d edits; Brand applies an empty edit and one edit of media (with more, FFmpeg repeats or skips samples)", len(edits))
		default:
			d, fits := rescale(e.Duration, int64(mediaScale), int64(movieScale))
			if !fits || d > 1<<62 || e.MediaTime > 1<<62 {
				return 0, Edit{}, false, errorf(ErrInvalid, "edit %d of the video track (%d at %d) is out of range", i, e.Duration, e.MediaTime)
			}
			ed, ok = Edit{Duration: d, MediaTime: e.MediaTime}, true
		}
	}
	if !ok {
		return 0, Edit{}, false, errorf(ErrInvalid, "the video track's edit list has only empty edits: no sample would be shown")
	}
	return empty, ed, true, nil
}

// applyEdit is FFmpeg 5.1's mov_fix_index for a video track with one edit
// of media after empty edits (ed in the media's timescale): it keeps the
// samples from the sync sample before the edit's start up to the sync
// sample after its end (one more with composition offsets, for the
// B-frames after it), marks those presented outside the edit discarded,
// retimes them onto the edit's timeline, and moves the timeline so that
// the first frame shown is at 0 (or at the empty edits' end).
func applyEdit(es []entry, empty int64, ed Edit, dtsShift int64, ctts bool) []entry {
	var end int64 = -dtsShift // edit_list_dts_entry_end
	end += empty
	counter := end
	m, d := ed.MediaTime, ed.Duration
	start := prevClosest(es, m, dtsShift, ctts)
	out := make([]entry, 0, len(es)-start)
	minPTS := int64(-1)
	started, keyAfter := false, false
	var lead []int64 // the durations of the discarded samples before the edit's first
	for i := start; i < len(es); i++ {
		cur := es[i]
		dur := d
		if i+1 < len(es) {
			dur = es[i+1].ts - cur.ts
		}
		cts := cur.ts + dtsShift
		var off int64
		if cur.hasCtts {
			off = cur.ctts
			cts += off
		}
		e := cur
		if cts < m || cts >= d+m {
			e.discard = true
			if !started {
				lead = append(lead, dur)
			}
		} else {
			if v := counter + off + dtsShift; minPTS < 0 {
				minPTS = v
			} else {
				minPTS = min(minPTS, v)
			}
			if !started {
				// Discarded samples before the edit are given times
				// counting back from the first one in it.
				started = true
				t := counter
				for k := range lead {
					t -= lead[len(lead)-1-k]
					out[len(out)-1-k].ts = t
				}
				lead = nil
			}
		}
		e.ts = counter
		out = append(out, e)
		if started {
			counter += dur
		}
		if cts+dur >= d+m && cur.key {
			if ctts && !keyAfter {
				keyAfter = true
				continue
			}
			break
		}
	}
	minPTS -= empty
	if minPTS > 0 {
		for i := range out {
			out[i].ts -= minPTS
		}
	}
	return out
}

// prevClosest is FFmpeg's find_prev_closest_index for the edit's start:
// the sync sample at or before media time m in decode order, moved back
// with composition offsets until one is presented at or before it; any
// sample when there is no such sync sample; the first when there is none.
func prevClosest(es []entry, m, dtsShift int64, ctts bool) int {
	want := m
	if dtsShift > 0 {
		want -= dtsShift
	}
	for _, any := range []bool{false, true} {
		i := searchBackward(es, want, any)
		if i >= 0 {
			for j := i; j > 0 && es[j].ts == es[j-1].ts; j-- {
				if any || es[j-1].key {
					i = j - 1
				}
			}
		}
		if ctts && i >= 0 {
			for i >= 0 && es[i].hasCtts {
				if es[i].ts+es[i].ctts <= want && es[i].key {
					break
				}
				i--
			}
		}
		if i >= 0 {
			return i
		}
	}
	return 0
}

// searchBackward is FFmpeg's ff_index_search_timestamp with
// AVSEEK_FLAG_BACKWARD on entries none of which is discarded: the last
// entry at or before want, then back to a sync sample unless any.
func searchBackward(es []entry, want int64, any bool) int {
	a, b := -1, len(es)
	if b > 0 && es[b-1].ts < want {
		a = b - 1
	}
	for b-a > 1 {
		m := (a + b) >> 1
		if es[m].ts >= want {
			b = m
		}
		if es[m].ts <= want {
			a = m
		}
	}
	i := a
	if !any {
		for i >= 0 && !es[i].key {
			i--
		}
	}
	return i
}

// timeOffset is FFmpeg's shift of a fragmented track's decode times by
// its edit list (mov_build_index's time_offset): the edit of media's
// start less the empty edit before it.
func timeOffset(empty int64, ed Edit, ok bool) int64 {
	if !ok {
		return -empty
	}
	return ed.MediaTime - empty
}
