package video

import (
	"fmt"
	"sort"
	"strings"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/keys"
)

// keyWidth is the digits a GOP's number in its key is padded to.
const keyWidth = 6

// Decoder decodes the chunks of one video dataset: a video chunk into its
// GOPs, each a sample whose one member ("gop") is the GOP's samples'
// bytes as they are in the file; a LeRobot dataset's Parquet chunks as
// format/parquet decodes them. Beyond format.Decoder it gives the
// description (Dataset) that clips are drawn from and a decoder reads
// GOPs with.
type Decoder struct {
	d         *Dataset
	rows      format.Decoder // LeRobot's Parquet rows; nil otherwise
	rowFields int
	fields    []format.Field
	extents   []extent // per video chunk
	stems     []string // per video: its key without its extension
}

// extent is what reading a video chunk costs.
type extent struct {
	ranges      []format.Range
	bound, null int64 // resident bounds with its GOPs, and with none (".null" members)
}

// open makes a dataset's decoder.
func open(d *Dataset, rows format.Decoder) (*Decoder, error) {
	dec := &Decoder{d: d, rows: rows}
	if rows != nil {
		dec.fields = append(dec.fields, rows.Fields()...)
		dec.rowFields = len(dec.fields)
	}
	if d.LeRobot != nil {
		for _, cam := range d.LeRobot.Cameras {
			dec.fields = append(dec.fields, format.Field{Name: cam, Ext: "gop", Type: "video GOP"})
		}
	} else {
		dec.fields = append(dec.fields, format.Field{Name: "gop", Ext: "gop", Type: "video GOP"})
	}
	for _, v := range d.Videos {
		dec.stems = append(dec.stems, stem(v.Key))
	}
	for c, ch := range d.Chunks {
		v := &d.Videos[ch.Video]
		var e extent
		n := ch.End - ch.First
		e.bound, e.null = format.Overhead(n), format.Overhead(n)
		for g := ch.First; g < ch.End; g++ {
			gop := v.Track.GOPs[g]
			e.ranges = append(e.ranges, gop.Ranges...)
			kl := keys.Len(dec.stems[ch.Video], g, keyWidth)
			e.bound += format.MemberLen(kl+len(".gop"), gop.Bytes)
			e.null += format.MemberLen(kl+len(".null"), 0)
		}
		e.ranges = format.Merge(e.ranges)
		if e.bound > format.MaxChunkBytes {
			return nil, fmt.Errorf("%w: chunk %d (GOPs %d–%d of %s) would be %d bytes resident, over the %d a chunk may be", format.ErrInvalid, c, ch.First, ch.End-1, v.Key, e.bound, int64(format.MaxChunkBytes))
		}
		dec.extents = append(dec.extents, e)
	}
	return dec, nil
}

// stem is an object's key without its extension: a video's GOPs are
// keyed under it.
func stem(key string) string {
	if i := strings.LastIndexByte(key, '.'); i > strings.LastIndexByte(key, '/') {
		return key[:i]
	}
	return key
}

// Dataset is the dataset's description. It is shared: read it, never
// write it.
func (dec *Decoder) Dataset() *Dataset { return dec.d }

// Fields are a tree of videos' one field, "gop"; a LeRobot dataset's
// Parquet columns, then a field per camera.
func (dec *Decoder) Fields() []format.Field { return dec.fields }

// GOPKey is the sample key of GOP g of video v: its key without its
// extension, "/", and g zero-padded to six digits.
func (dec *Decoder) GOPKey(v, g int) string { return keys.One(dec.stems[v], g, keyWidth) }

// Unit is the unit chunk c's samples are owned with (Chunk.Unit); a
// LeRobot row chunk's is the episode of its first row.
func (dec *Decoder) Unit(c int) int {
	if i := dec.d.Layout(c); i >= 0 {
		return dec.d.Chunks[i].Unit
	}
	l := dec.d.LeRobot
	for _, f := range l.DataFiles {
		if c >= f.Chunks[0] && c < f.Chunks[1] {
			row := f.FirstRow
			for _, n := range f.ChunkRows[:c-f.Chunks[0]] {
				row += n
			}
			return l.EpisodeOf(row)
		}
	}
	return -1
}

// selected reports whether a video chunk's GOPs are read by sel.
func (dec *Decoder) selected(ch Chunk, sel format.Selection) bool {
	if dec.d.LeRobot == nil {
		return true
	}
	cam := dec.d.Videos[ch.Video].Camera
	for k, name := range dec.d.LeRobot.Cameras {
		if name == cam {
			return sel.Has(dec.rowFields + k)
		}
	}
	return false
}

// rowSelection is sel's part for the Parquet rows: nil for all of them,
// and none (ok false) when sel reads no column.
func (dec *Decoder) rowSelection(sel format.Selection) (format.Selection, bool) {
	if sel.All() {
		return nil, true
	}
	var out format.Selection
	for _, f := range sel {
		if f < dec.rowFields {
			out = append(out, f)
		}
	}
	switch len(out) {
	case 0:
		return nil, false
	case dec.rowFields:
		return nil, true
	}
	return out, true
}

// Extent is a video chunk's GOPs' bytes, adjacent ranges merged (the
// other tracks' samples between them are not read), and its exact
// resident bound; a chunk of a camera sel does not read costs nothing to
// read and holds ".null" members. A LeRobot row chunk's is
// format/parquet's for the columns sel reads.
func (dec *Decoder) Extent(c int, sel format.Selection) ([]format.Range, int64) {
	i := dec.d.Layout(c)
	if i < 0 {
		rs, ok := dec.rowSelection(sel)
		if !ok {
			return nil, dec.nullRows(c)
		}
		return dec.rows.Extent(c, rs)
	}
	e := dec.extents[i]
	if !dec.selected(dec.d.Chunks[i], sel) {
		return nil, e.null
	}
	return e.ranges, e.bound
}

// rowKeys are the keys of row chunk c's rows: format/parquet's (its
// file's key without ".parquet", "/", the row's number in the file
// zero-padded to the digits of the file's row count).
func (dec *Decoder) rowKeys(c int) []string {
	for _, f := range dec.d.LeRobot.DataFiles {
		if c < f.Chunks[0] || c >= f.Chunks[1] {
			continue
		}
		first := 0
		for _, n := range f.ChunkRows[:c-f.Chunks[0]] {
			first += n
		}
		return keys.Append(nil, strings.TrimSuffix(f.Key, ".parquet"), first, f.ChunkRows[c-f.Chunks[0]], digits(f.Rows))
	}
	return nil
}

func digits(n int) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// nullRows is the resident bound of row chunk c with no column read: a
// ".null" member a row, as format/parquet writes a row with no value.
func (dec *Decoder) nullRows(c int) int64 {
	ks := dec.rowKeys(c)
	n := format.Overhead(len(ks))
	for _, k := range ks {
		n += format.MemberLen(len(k)+len(".null"), 0)
	}
	return n
}

// Working implements format.Working: a video chunk's keys and headers; a
// row chunk's, format/parquet's.
func (dec *Decoder) Working(c int, sel format.Selection) int64 {
	i := dec.d.Layout(c)
	if i < 0 {
		rs, ok := dec.rowSelection(sel)
		if w, isW := dec.rows.(format.Working); ok && isW {
			return w.Working(c, rs)
		}
		return format.MemberWorking + 64<<10
	}
	ch := dec.d.Chunks[i]
	n := int64(ch.End - ch.First)
	longest := keys.Len(dec.stems[ch.Video], ch.End-1, keyWidth) + len(".null")
	return n*(64+format.HeaderWorking(longest)) + format.MemberWorking + 64<<10
}

// Decode writes chunk c's samples. A video chunk's GOP is checked as it
// is copied: an H.264 or H.265 sample must be a run of length-prefixed
// NAL units filling it exactly, else the chunk is damaged. A GOP whose
// bytes failed the index's CRC32Cs at rest (wo.Damaged) is written as a
// damaged sample naming the file and the GOP (format.WriteDamaged), and
// the chunk's other GOPs as usual: its clips alone fail.
func (dec *Decoder) Decode(c int, sel format.Selection, src, dst []byte, wo format.WriterOptions) error {
	i := dec.d.Layout(c)
	if i < 0 {
		rs, ok := dec.rowSelection(sel)
		if !ok {
			return dec.decodeNullRows(c, dst, wo)
		}
		return dec.rows.Decode(c, rs, src, dst, wo)
	}
	ch := dec.d.Chunks[i]
	v := &dec.d.Videos[ch.Video]
	w, err := format.NewWriter(dst, ch.End-ch.First, wo)
	if err != nil {
		return err
	}
	if !dec.selected(ch, sel) {
		for g := ch.First; g < ch.End; g++ {
			if err := w.Begin(dec.GOPKey(ch.Video, g)); err != nil {
				return err
			}
			if _, err := w.Member("null", 0); err != nil {
				return err
			}
		}
		return w.Finish()
	}
	rd, err := format.NewRead(dec.extents[i].ranges, src)
	if err != nil {
		return err
	}
	lenSize := nalLengthSize(v.Track.Codec, v.Track.Config)
	for g := ch.First; g < ch.End; g++ {
		gop := v.Track.GOPs[g]
		key := dec.GOPKey(ch.Video, g)
		if err := w.Begin(key); err != nil {
			return err
		}
		if d, ok := format.Touches(gop.Ranges, wo.Damaged); ok {
			// Damaged at rest: the GOP's clips fail (or are skipped),
			// naming it; the chunk's other GOPs are served.
			room := format.MemberLen(len(key)+len(".gop"), gop.Bytes)
			if err := format.WriteDamaged(w, key, dec.damageCause(ch.Video, g, d), room); err != nil {
				return err
			}
			continue
		}
		m, err := w.Member("gop", gop.Bytes)
		if err != nil {
			return err
		}
		at := 0
		for _, r := range gop.Ranges {
			b, err := rd.Bytes(r.Off, r.Len)
			if err != nil {
				return fmt.Errorf("%s, GOP %d: %w", v.Key, g, err)
			}
			at += copy(m[at:], b)
		}
		if lenSize > 0 {
			for s := gop.First; s < gop.End; s++ {
				b, err := v.GOPSample(g, int(s), m)
				if err == nil {
					err = checkNALs(b, lenSize)
				}
				if err != nil {
					return fmt.Errorf("%w: %s, sample %d (GOP %d): %v", format.ErrDamaged, v.Key, s, g, err)
				}
			}
		}
	}
	return w.Finish()
}

// Confines implements format.Confiner: a video chunk's GOPs are each
// read from their own bytes of the file, so damage at rest fails only
// the GOPs it touches; a LeRobot row chunk (Parquet) is damaged whole.
func (dec *Decoder) Confines(c int) bool { return dec.d.Layout(c) >= 0 }

// SampleRanges implements format.Confiner: a video chunk's GOPs'
// ranges; none for a LeRobot row chunk.
func (dec *Decoder) SampleRanges(c int) [][]format.Range {
	i := dec.d.Layout(c)
	if i < 0 {
		return nil
	}
	ch := dec.d.Chunks[i]
	v := &dec.d.Videos[ch.Video]
	out := make([][]format.Range, 0, ch.End-ch.First)
	for g := ch.First; g < ch.End; g++ {
		out = append(out, v.Track.GOPs[g].Ranges)
	}
	return out
}

// damageCause names GOP g of video v, its frames and the damage.
func (dec *Decoder) damageCause(v, g int, d format.Damage) string {
	vid := &dec.d.Videos[v]
	return fmt.Sprintf("GOP %d of %s (sample %s, %d packets from decode order %d) fails its CRC32C: %s",
		g, vid.Key, dec.GOPKey(v, g), vid.Track.GOPs[g].End-vid.Track.GOPs[g].First, vid.Track.GOPs[g].First, d.Cause)
}

func (dec *Decoder) decodeNullRows(c int, dst []byte, wo format.WriterOptions) error {
	ks := dec.rowKeys(c)
	w, err := format.NewWriter(dst, len(ks), wo)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := w.Begin(k); err != nil {
			return err
		}
		if _, err := w.Member("null", 0); err != nil {
			return err
		}
	}
	return w.Finish()
}

// GOPSample returns sample s of GOP g within member, the GOP's member as
// Decode wrote it (its ranges' bytes back to back, in file order).
func (v *Video) GOPSample(g, s int, member []byte) ([]byte, error) {
	gop := v.Track.GOPs[g]
	if s < int(gop.First) || s >= int(gop.End) {
		return nil, fmt.Errorf("sample %d is not in GOP %d [%d, %d)", s, g, gop.First, gop.End)
	}
	smp := v.Track.Samples[s]
	i := sort.Search(len(gop.Ranges), func(i int) bool { return gop.Ranges[i].End() > smp.Off })
	if i == len(gop.Ranges) || smp.Off < gop.Ranges[i].Off || smp.Off+int64(smp.Size) > gop.Ranges[i].End() {
		return nil, fmt.Errorf("sample %d (%d bytes at %d) is not in GOP %d's ranges", s, smp.Size, smp.Off, g)
	}
	at := smp.Off - gop.Ranges[i].Off
	for _, r := range gop.Ranges[:i] {
		at += r.Len
	}
	if at+int64(smp.Size) > int64(len(member)) {
		return nil, fmt.Errorf("GOP %d's member of %d bytes is short of sample %d", g, len(member), s)
	}
	return member[at : at+int64(smp.Size) : at+int64(smp.Size)], nil
}

// nalLengthSize is the size of an H.264 or H.265 sample's NAL unit
// lengths, from its configuration (avcC: lengthSizeMinusOne in byte 4;
// hvcC: in byte 21), or 0 for another codec or a configuration too short
// to say.
func nalLengthSize(codec string, config []byte) int {
	switch {
	case codec == "h264" && len(config) > 4:
		return int(config[4]&3) + 1
	case codec == "hevc" && len(config) > 21:
		return int(config[21]&3) + 1
	}
	return 0
}

// checkNALs checks that b is length-prefixed NAL units filling it.
func checkNALs(b []byte, size int) error {
	for len(b) > 0 {
		if len(b) < size {
			return fmt.Errorf("%d bytes left, short of a NAL unit's %d-byte length", len(b), size)
		}
		var n uint64
		for _, c := range b[:size] {
			n = n<<8 | uint64(c)
		}
		b = b[size:]
		if n == 0 || n > uint64(len(b)) {
			return fmt.Errorf("a NAL unit of %d bytes with %d left", n, len(b))
		}
		b = b[n:]
	}
	return nil
}
