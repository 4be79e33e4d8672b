package mp4

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/brandgw/brand/format"
)

// headerBytes is what a top-level box header read asks for: a header
// with a 32-bit size, the common one. One with a 64-bit size takes a
// second read of 8 bytes, so that no read ever reaches into an mdat's
// media.
const headerBytes = 8

// topLevel are the box types a file may start with: anything else is not
// an ISO-BMFF, MP4 or QuickTime file.
var topLevel = map[string]bool{
	"ftyp": true, "styp": true, "moov": true, "mdat": true, "free": true, "skip": true,
	"wide": true, "pnot": true, "uuid": true, "sidx": true, "moof": true, "meta": true, "junk": true,
}

// fetcher reads a file's ranges for Index, counting them, and keeps the
// last read so that a header inside it costs no request.
type fetcher struct {
	ctx   context.Context
	src   Source
	size  int64
	buf   []byte
	at    int64
	reads int
	bytes int64
}

// get returns the file's bytes [off, off+n), n cut at the end of the file.
func (f *fetcher) get(off, n int64) ([]byte, error) {
	n = min(n, f.size-off)
	if off >= f.at && off+n <= f.at+int64(len(f.buf)) {
		return f.buf[off-f.at : off-f.at+n], nil
	}
	p := make([]byte, n)
	if err := f.src.ReadRange(f.ctx, off, p); err != nil {
		return nil, fmt.Errorf("mp4: reading bytes %d+%d: %w", off, n, err)
	}
	f.reads++
	f.bytes += n
	f.buf, f.at = p, off
	return p, nil
}

// header reads the header of the top-level box at off: its type, its
// total size and the size of the header.
func (f *fetcher) header(off int64) (typ string, size, hdr int64, err error) {
	b, err := f.get(off, headerBytes)
	if err != nil {
		return "", 0, 0, err
	}
	if len(b) < 8 {
		return "", 0, 0, errorf(ErrInvalid, "%d bytes after the last box, at %d: not a box header (a truncated file?)", len(b), off)
	}
	typ = fourcc(b[4:8])
	size, hdr = int64(binary.BigEndian.Uint32(b)), 8
	switch size {
	case 0:
		size = f.size - off
	case 1:
		if b, err = f.get(off, 16); err != nil {
			return "", 0, 0, err
		}
		if len(b) < 16 {
			return "", 0, 0, errorf(ErrInvalid, "box %q at %d: its 64-bit size is cut off by the end of the file", typ, off)
		}
		u := binary.BigEndian.Uint64(b[8:])
		if u > uint64(f.size) {
			return "", 0, 0, errorf(ErrInvalid, "box %q at %d of %d bytes runs past the end of the file (%d bytes): the file is truncated", typ, off, u, f.size)
		}
		size, hdr = int64(u), 16
	}
	switch {
	case size < hdr:
		return "", 0, 0, errorf(ErrInvalid, "box %q at %d states a size of %d", typ, off, size)
	case size > f.size-off:
		return "", 0, 0, errorf(ErrInvalid, "box %q at %d of %d bytes runs past the end of the file (%d bytes): the file is truncated", typ, off, size, f.size)
	}
	return typ, size, hdr, nil
}

// Index reads the metadata of the MP4/MOV file of size bytes that src
// reads — the moov box, wherever it is, and every moof of a fragmented
// file — with range reads of it and of the top-level box headers, never
// the media data, and indexes its video track (package doc).
func Index(ctx context.Context, src Source, size int64, lim Limits) (*File, error) {
	lim = lim.WithDefaults()
	f := &fetcher{ctx: ctx, src: src, size: size}
	file := &File{Size: size}
	var (
		mv    *movie
		frags *fragments
		meta  int64 // metadata bytes read, against lim.MetaBytes
	)
	var off int64
	for boxes := 0; off < size; boxes++ {
		if boxes >= lim.Boxes {
			return nil, errorf(ErrLimit, "more than %d top-level boxes", lim.Boxes)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if boxes == 0 {
			b, err := f.get(0, 8)
			if err != nil {
				return nil, err
			}
			if len(b) == 8 && !topLevel[fourcc(b[4:])] {
				// Its bytes are not quoted: the file may be anything (a
				// link to a file that is no video), and an error is
				// logged and answered to whoever asked.
				return nil, errorf(ErrInvalid, "not an MP4 or QuickTime file: it does not start with a box of one (ftyp, moov, mdat, …)")
			}
		}
		typ, bsize, hdr, err := f.header(off)
		if err != nil {
			return nil, err
		}
		// body reads a metadata box's payload, and the next box's header
		// with it.
		body := func() ([]byte, error) {
			meta += bsize
			if meta > lim.MetaBytes {
				return nil, errorf(ErrLimit, "the file's metadata (box %q at %d of %d bytes, and those before it) passes %d bytes", typ, off, bsize, lim.MetaBytes)
			}
			b, err := f.get(off, bsize+headerBytes)
			if err != nil {
				return nil, err
			}
			return b[hdr:bsize], nil
		}
		switch typ {
		case "ftyp":
			if bsize <= 4096 {
				b, err := body()
				if err != nil {
					return nil, err
				}
				if len(b) >= 4 {
					file.Brand = fourcc(b)
				}
			}
		case "moov":
			if mv != nil {
				return nil, errorf(ErrInvalid, "a second moov box at %d", off)
			}
			b, err := body()
			if err != nil {
				return nil, err
			}
			if mv, err = parseMoov(b, off, lim); err != nil {
				return nil, err
			}
			file.Moov = format.Range{Off: off, Len: bsize}
			if mv.mvex {
				empty, ed, ok, err := editShape(mv.video.edits, mv.timescale, mv.video.timescale)
				if err != nil {
					return nil, err
				}
				frags = &fragments{
					track: mv.video.id, trex: mv.trex, timeOffset: timeOffset(empty, ed, ok),
					sidx: map[int64]int64{}, timescale: mv.video.timescale, limit: lim.Samples, fileSize: size,
				}
			}
		case "moof":
			if frags == nil {
				return nil, errorf(ErrInvalid, "a moof box at %d without a moov before it that announces fragments (mvex)", off)
			}
			b, err := body()
			if err != nil {
				return nil, err
			}
			if err := frags.moof(b, off); err != nil {
				return nil, err
			}
			file.Fragments++
		case "sidx":
			if frags != nil {
				b, err := body()
				if err != nil {
					return nil, err
				}
				if err := frags.parseSidx(b, off, off+bsize); err != nil {
					return nil, err
				}
			}
		}
		off += bsize
		if mv != nil && frags == nil {
			break // all there is to read is in the moov
		}
	}
	if mv == nil {
		return nil, errorf(ErrInvalid, "no moov box: not an MP4 file, or one truncated before its metadata")
	}
	t, err := buildTrack(mv, frags, size, lim)
	if err != nil {
		return nil, err
	}
	file.Video = *t
	file.Reads, file.BytesRead = f.reads, f.bytes
	return file, nil
}

// buildTrack makes the video track's samples, frames and GOPs.
func buildTrack(mv *movie, frags *fragments, size int64, lim Limits) (*Track, error) {
	v := mv.video
	if v.entry.codec == "" {
		return nil, errorf(ErrInvalid, "the video track has no sample entry (stsd)")
	}
	if len(v.drefs) > 0 {
		if v.entry.dref < 1 || v.entry.dref > len(v.drefs) {
			return nil, errorf(ErrInvalid, "the video track's sample entry names data reference %d of %d", v.entry.dref, len(v.drefs))
		}
		if !v.drefs[v.entry.dref-1] {
			return nil, errorf(ErrUnsupported, "the video track's media data is in another file (an external data reference)")
		}
	}
	t := &Track{
		ID: v.id, Timescale: v.timescale, Codec: v.entry.codec, Entry: v.entry.tag,
		Width: v.entry.width, Height: v.entry.height, Extradata: v.entry.extradata, Config: v.entry.config,
		Matrix: v.matrix, Rotation: rotation(v.matrix), Edits: v.edits,
	}
	es, dtsShift, ctts, err := v.buildSamples(size, lim)
	if err != nil {
		return nil, err
	}
	empty, ed, ok, err := editShape(v.edits, mv.timescale, v.timescale)
	if err != nil {
		return nil, err
	}
	if ok && len(es) > 0 {
		es = applyEdit(es, empty, ed, dtsShift, ctts)
	}
	t.Samples = make([]Sample, len(es), len(es)+len(framesOf(frags)))
	for i, e := range es {
		pts := e.ts
		if e.hasCtts {
			pts = e.ts + dtsShift + e.ctts
		}
		t.Samples[i] = Sample{Off: e.off, Size: e.size, DTS: e.ts, PTS: pts, Key: e.key, Discard: e.discard}
	}
	if frags != nil {
		if len(t.Samples)+len(frags.samples) > lim.Samples {
			return nil, errorf(ErrLimit, "the video track has %d samples; at most %d are read", len(t.Samples)+len(frags.samples), lim.Samples)
		}
		t.Samples = append(t.Samples, frags.samples...)
	}
	if len(t.Samples) == 0 {
		return nil, errorf(ErrInvalid, "the video track has no samples")
	}
	t.Frames, t.GOPs = Derive(t.Samples)
	if len(t.Frames) == 0 {
		return nil, errorf(ErrInvalid, "the video track's edit list discards every one of its %d samples: no frame would be shown", len(t.Samples))
	}
	return t, nil
}

func framesOf(fs *fragments) []Sample {
	if fs == nil {
		return nil
	}
	return fs.samples
}

// Derive returns the frames and GOPs of a track whose samples, in decode
// order, are ss: the samples shown sorted into presentation order, and
// the samples grouped from each sync sample to the next (Track.Frames,
// Track.GOPs). A description that keeps only the samples derives the
// rest again with it.
func Derive(ss []Sample) ([]Frame, []GOP) {
	var gops []GOP
	gop := make([]int32, len(ss))
	for i, s := range ss {
		if i == 0 || s.Key {
			gops = append(gops, GOP{First: int32(i)})
		}
		g := len(gops) - 1
		gops[g].End = int32(i + 1)
		gop[i] = int32(g)
	}
	frames := make([]Frame, 0, len(ss))
	for i, s := range ss {
		if !s.Discard {
			frames = append(frames, Frame{PTS: s.PTS, Sample: int32(i), GOP: gop[i]})
		}
	}
	slices.SortStableFunc(frames, func(a, b Frame) int {
		switch {
		case a.PTS < b.PTS:
			return -1
		case a.PTS > b.PTS:
			return 1
		}
		return 0
	})
	for g := range gops {
		gp := &gops[g]
		key := ss[gp.First].PTS
		for i := gp.First; i < gp.End; i++ {
			s := ss[i]
			if !s.Discard && s.PTS < key {
				gp.Leading = true
			}
			if s.Size > 0 {
				gp.Ranges = append(gp.Ranges, format.Range{Off: s.Off, Len: int64(s.Size)})
			}
		}
		gp.Ranges = format.Merge(gp.Ranges)
		gp.Bytes = format.Concat(gp.Ranges)
	}
	return frames, gops
}
