package video

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video/mp4"
)

// The description (format.Layout.Meta) is
//
//	"BRANDVID" | version u8 | uvarint n | n bytes of JSON (the Dataset but
//	its samples, timestamps and Parquet description) | each video's
//	samples | LeRobot: each row's timestamp, float32 little-endian | the
//	Parquet description
//
// A sample is five varints: its offset less the end of the one before,
// its size, its DTS less the one before's, its PTS less its DTS (those
// signed, zigzag), and its flags (1 key, 2 discard): about 6 bytes where
// a JSON sample would take 70. Frames and GOPs are derived again on Open
// (mp4.Derive), so they cannot disagree with the samples.
const (
	metaMagic   = "BRANDVID"
	metaVersion = 1
)

type metaHeader struct {
	Kind       string
	Videos     []videoHeader
	Chunks     []Chunk
	Classes    []string `json:",omitempty"`
	LeRobot    *LeRobot `json:",omitempty"`
	ParquetLen int      `json:",omitempty"`
}

type videoHeader struct {
	Key       string
	ETag      string
	Size      int64
	Camera    string `json:",omitempty"`
	Label     int
	JSON      []byte `json:",omitempty"`
	ID        uint32
	Timescale uint32
	Codec     string
	Entry     string
	Width     int
	Height    int
	Extradata []byte `json:",omitempty"`
	Config    []byte `json:",omitempty"`
	Matrix    [9]int32
	Rotation  int
	Edits     []mp4.Edit `json:",omitempty"`
	Samples   int
	Chunks    [2]int
}

// encode is d's description, deterministic: the same dataset encodes to
// the same bytes.
func (d *Dataset) encode() ([]byte, error) {
	h := metaHeader{Kind: d.Kind, Chunks: d.Chunks, Classes: d.Classes, LeRobot: d.LeRobot}
	if d.LeRobot != nil {
		h.ParquetLen = len(d.LeRobot.Parquet)
	}
	for _, v := range d.Videos {
		t := v.Track
		h.Videos = append(h.Videos, videoHeader{
			Key: v.Key, ETag: v.ETag, Size: v.Size, Camera: v.Camera, Label: v.Label, JSON: v.JSON,
			ID: t.ID, Timescale: t.Timescale, Codec: t.Codec, Entry: t.Entry, Width: t.Width, Height: t.Height,
			Extradata: t.Extradata, Config: t.Config, Matrix: t.Matrix, Rotation: t.Rotation, Edits: t.Edits,
			Samples: len(t.Samples), Chunks: v.Chunks,
		})
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("video: encoding the description: %w", err)
	}
	b := append([]byte(metaMagic), metaVersion)
	b = binary.AppendUvarint(b, uint64(len(js)))
	b = append(b, js...)
	for _, v := range d.Videos {
		var end, dts int64
		for _, s := range v.Track.Samples {
			b = binary.AppendVarint(b, s.Off-end)
			b = binary.AppendUvarint(b, uint64(s.Size))
			b = binary.AppendVarint(b, s.DTS-dts)
			b = binary.AppendVarint(b, s.PTS-s.DTS)
			var fl byte
			if s.Key {
				fl |= 1
			}
			if s.Discard {
				fl |= 2
			}
			b = append(b, fl)
			end, dts = s.Off+int64(s.Size), s.DTS
		}
	}
	if l := d.LeRobot; l != nil {
		for _, ts := range l.Timestamps {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(ts))
		}
		b = append(b, l.Parquet...)
	}
	return b, nil
}

// decodeMeta reads a description back, checking everything it states:
// a description that does not match its index is refused at Open (the
// index holds its digest), but Open is also the parser of hostile bytes
// (FuzzOpen).
func decodeMeta(b []byte) (*Dataset, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: video description: "+format, append([]any{errInvalid}, args...)...)
	}
	if !bytes.HasPrefix(b, []byte(metaMagic)) || len(b) < len(metaMagic)+1 {
		return nil, bad("no %s magic", metaMagic)
	}
	if v := b[len(metaMagic)]; v != metaVersion {
		return nil, bad("version %d (this build reads %d)", v, metaVersion)
	}
	b = b[len(metaMagic)+1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, bad("a header of %d bytes in %d", n, len(b))
	}
	var h metaHeader
	if err := json.Unmarshal(b[k:k+int(n)], &h); err != nil {
		return nil, bad("%v", err)
	}
	b = b[k+int(n):]
	d := &Dataset{Kind: h.Kind, Chunks: h.Chunks, Classes: h.Classes, LeRobot: h.LeRobot}
	for i, vh := range h.Videos {
		// A sample takes at least five bytes: a count past the bytes left
		// is refused before anything is made for it.
		if vh.Samples <= 0 || vh.Samples > len(b)/5 || vh.Samples > mp4.DefaultLimits.Samples {
			return nil, bad("video %d states %d samples in %d bytes", i, vh.Samples, len(b))
		}
		ss := make([]mp4.Sample, vh.Samples)
		var end, dts int64
		for j := range ss {
			var vals [4]int64
			for f := range vals {
				var x int64
				var m int
				if f == 1 {
					u, mm := binary.Uvarint(b)
					x, m = int64(u), mm
					if u > math.MaxUint32 {
						m = -1
					}
				} else {
					x, m = binary.Varint(b)
				}
				if m <= 0 {
					return nil, bad("video %d sample %d is cut off", i, j)
				}
				vals[f] = x
				b = b[m:]
			}
			if len(b) == 0 || b[0] > 3 {
				return nil, bad("video %d sample %d is cut off", i, j)
			}
			s := mp4.Sample{Off: end + vals[0], Size: uint32(vals[1]), DTS: dts + vals[2], Key: b[0]&1 != 0, Discard: b[0]&2 != 0}
			s.PTS = s.DTS + vals[3]
			b = b[1:]
			if s.Off < 0 || s.Off > vh.Size || int64(s.Size) > vh.Size-s.Off || abs(vals[2]) > 1<<50 || abs(vals[3]) > 1<<50 {
				return nil, bad("video %d sample %d (%d bytes at %d) is outside its %d bytes", i, j, s.Size, s.Off, vh.Size)
			}
			ss[j] = s
			end, dts = s.Off+int64(s.Size), s.DTS
		}
		if vh.Timescale == 0 {
			return nil, bad("video %d has no timescale", i)
		}
		t := mp4.Track{
			ID: vh.ID, Timescale: vh.Timescale, Codec: vh.Codec, Entry: vh.Entry, Width: vh.Width, Height: vh.Height,
			Extradata: vh.Extradata, Config: vh.Config, Matrix: vh.Matrix, Rotation: vh.Rotation, Edits: vh.Edits, Samples: ss,
		}
		t.Frames, t.GOPs = mp4.Derive(ss)
		if len(t.Frames) == 0 {
			return nil, bad("video %d shows no frame", i)
		}
		d.Videos = append(d.Videos, Video{Key: vh.Key, ETag: vh.ETag, Size: vh.Size, Camera: vh.Camera, Label: vh.Label, JSON: vh.JSON, Track: t, Chunks: vh.Chunks})
	}
	if l := d.LeRobot; l != nil {
		if l.Rows < 0 || l.Rows > len(b)/4 || h.ParquetLen != len(b)-4*l.Rows {
			return nil, bad("%d rows' timestamps and %d bytes of Parquet description in %d bytes", l.Rows, h.ParquetLen, len(b))
		}
		l.Timestamps = make([]float32, l.Rows)
		for i := range l.Timestamps {
			l.Timestamps[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		l.Parquet = b[4*l.Rows:]
	} else if len(b) != 0 {
		return nil, bad("%d bytes after the samples", len(b))
	}
	if err := d.check(); err != nil {
		return nil, bad("%v", err)
	}
	return d, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// check verifies that the chunks tile each video's GOPs in order and
// that the LeRobot tables name only what there is.
func (d *Dataset) check() error {
	if d.Kind != "video" && d.Kind != "lerobot" || d.Kind == "lerobot" && d.LeRobot == nil {
		return fmt.Errorf("kind %q", d.Kind)
	}
	next := 0
	for v := range d.Videos {
		vid := &d.Videos[v]
		cs := vid.Chunks
		if cs[0] != next || cs[1] <= cs[0] || cs[1] > len(d.Chunks) {
			return fmt.Errorf("video %d's chunks [%d, %d) after chunk %d of %d", v, cs[0], cs[1], next, len(d.Chunks))
		}
		g := 0
		for c := cs[0]; c < cs[1]; c++ {
			ch := d.Chunks[c]
			if ch.Video != v || ch.First != g || ch.End <= ch.First || ch.End > len(vid.Track.GOPs) {
				return fmt.Errorf("chunk %d is GOPs [%d, %d) of video %d, after GOP %d of video %d's %d", c, ch.First, ch.End, ch.Video, g, v, len(vid.Track.GOPs))
			}
			g = ch.End
		}
		if g != len(vid.Track.GOPs) {
			return fmt.Errorf("video %d's chunks end at GOP %d of %d", v, g, len(vid.Track.GOPs))
		}
		if vid.Label < -1 || len(d.Classes) > 0 && vid.Label >= len(d.Classes) {
			return fmt.Errorf("video %d's label %d", v, vid.Label)
		}
		next = cs[1]
	}
	if next != len(d.Chunks) {
		return fmt.Errorf("%d chunks, the videos' end at %d", len(d.Chunks), next)
	}
	if l := d.LeRobot; l != nil {
		if l.FPS <= 0 || l.RowChunks < 0 || l.Rows < 0 {
			return fmt.Errorf("fps %d, %d row chunks, %d rows", l.FPS, l.RowChunks, l.Rows)
		}
		at := 0
		for i, f := range l.DataFiles {
			if f.FirstRow != at || f.Rows < 0 || f.Chunks[0] < 0 || f.Chunks[1] < f.Chunks[0] || f.Chunks[1] > l.RowChunks || len(f.ChunkRows) != f.Chunks[1]-f.Chunks[0] {
				return fmt.Errorf("data file %d", i)
			}
			n := 0
			for _, r := range f.ChunkRows {
				if r <= 0 {
					return fmt.Errorf("data file %d has a chunk of %d rows", i, r)
				}
				n += r
			}
			if n != f.Rows {
				return fmt.Errorf("data file %d's chunks hold %d rows of its %d", i, n, f.Rows)
			}
			at += f.Rows
		}
		if at != l.Rows {
			return fmt.Errorf("data files of %d rows, %d in all", at, l.Rows)
		}
		row := 0
		for i, e := range l.Episodes {
			if e.From != row || e.To <= e.From || e.To > l.Rows || e.Data < 0 || e.Data >= len(l.DataFiles) || len(e.Videos) != len(l.Cameras) {
				return fmt.Errorf("episode %d", i)
			}
			for k, ev := range e.Videos {
				if ev.Video < 0 || ev.Video >= len(d.Videos) || d.Videos[ev.Video].Camera != l.Cameras[k] || ev.Chunks[0] < 0 || ev.Chunks[1] < ev.Chunks[0] || ev.Chunks[1] > len(d.Chunks) || math.IsNaN(ev.From) || math.IsNaN(ev.To) {
					return fmt.Errorf("episode %d's video %d", i, k)
				}
			}
			row = e.To
		}
		if row != l.Rows {
			return fmt.Errorf("episodes of %d rows, %d in all", row, l.Rows)
		}
		for c := range d.Chunks {
			if u := d.Chunks[c].Unit; u < 0 || u >= len(l.Episodes) {
				return fmt.Errorf("chunk %d of episode %d", c, u)
			}
		}
	}
	return nil
}

// errInvalid is the kind of a description that does not decode.
var errInvalid = format.ErrInvalid
