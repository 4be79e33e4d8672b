package mp4

import (
	"bytes"
	"encoding/binary"
)

// synth describes a small MP4 file that the tests build box by box, to
// state exactly what a table says (the ffmpeg-written fixtures cover what
// real writers do; these cover what they never do).
type synth struct {
	entry     string // sample entry type; "" is "avc1"
	w, h      uint16
	config    []byte // the configuration box's payload; nil is a short avcC
	sizes     []uint32
	deltas    []uint32 // stts per sample; nil is 512 each
	ctts      []int32  // nil: no ctts
	sync      []uint32 // 1-based; nil: no stss; empty: an empty stss
	perChunk  int      // samples a chunk; 0 is 4
	edits     []Edit   // elst
	moovFirst bool
	co64      bool
	stz2      int // field bits, 0 for stsz
	handler   string
	timescale uint32
	matrix    [9]int32
	audio     bool // an audio track before the video one
	frag      bool // samples in one moof per sync sample instead of stbl
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// mkbox is a box of typ holding parts.
func mkbox(typ string, parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	return append(append(be32(uint32(8+len(body))), typ...), body...)
}

// fullbox is a full box's version and flags.
func fullbox(v uint8, flags uint32) []byte {
	return []byte{v, byte(flags >> 16), byte(flags >> 8), byte(flags)}
}

func (s synth) defaults() synth {
	if s.entry == "" {
		s.entry = "avc1"
	}
	if s.w == 0 && s.h == 0 {
		s.w, s.h = 64, 48
	}
	if s.config == nil {
		s.config = []byte{1, 0x64, 0, 10, 0xff, 0xe1, 0, 4, 0x67, 0x64, 0, 10, 1, 0, 2, 0x68, 0xee}
	}
	if s.deltas == nil {
		s.deltas = make([]uint32, len(s.sizes))
		for i := range s.deltas {
			s.deltas[i] = 512
		}
	}
	if s.perChunk == 0 {
		s.perChunk = 4
	}
	if s.handler == "" {
		s.handler = "vide"
	}
	if s.timescale == 0 {
		s.timescale = 12800
	}
	if s.matrix == [9]int32{} {
		s.matrix = [9]int32{1 << 16, 0, 0, 0, 1 << 16, 0, 0, 0, 1 << 30}
	}
	return s
}

// data is sample i's bytes: its number repeated.
func (s synth) data() []byte {
	var b []byte
	for i, n := range s.sizes {
		b = append(b, bytes.Repeat([]byte{byte(i + 1)}, int(n))...)
	}
	return b
}

func (s synth) stbl(offsets []uint64) []byte {
	entry := mkbox(s.entry, make([]byte, 6), be16(1), make([]byte, 16), be16(s.w), be16(s.h),
		be32(0x480000), be32(0x480000), be32(0), be16(1), make([]byte, 32), be16(24), be16(0xffff),
		mkbox(map[string]string{"avc1": "avcC", "avc3": "avcC", "hvc1": "hvcC", "hev1": "hvcC", "vp09": "vpcC", "av01": "av1C", "mp4v": "esds"}[s.entry], s.config))
	parts := [][]byte{mkbox("stsd", fullbox(0, 0), be32(1), entry)}
	if s.frag {
		parts = append(parts, mkbox("stts", fullbox(0, 0), be32(0)), mkbox("stsc", fullbox(0, 0), be32(0)),
			mkbox("stsz", fullbox(0, 0), be32(0), be32(0)), mkbox("stco", fullbox(0, 0), be32(0)))
		return mkbox("stbl", parts...)
	}
	var stts []byte
	runs := 0
	for i := 0; i < len(s.deltas); {
		j := i
		for j < len(s.deltas) && s.deltas[j] == s.deltas[i] {
			j++
		}
		stts = append(append(stts, be32(uint32(j-i))...), be32(s.deltas[i])...)
		runs++
		i = j
	}
	parts = append(parts, mkbox("stts", fullbox(0, 0), be32(uint32(runs)), stts))
	if s.ctts != nil {
		var c []byte
		for _, v := range s.ctts {
			c = append(append(c, be32(1)...), be32(uint32(v))...)
		}
		parts = append(parts, mkbox("ctts", fullbox(1, 0), be32(uint32(len(s.ctts))), c))
	}
	if s.sync != nil {
		var c []byte
		for _, v := range s.sync {
			c = append(c, be32(v)...)
		}
		parts = append(parts, mkbox("stss", fullbox(0, 0), be32(uint32(len(s.sync))), c))
	}
	switch s.stz2 {
	case 0:
		var c []byte
		for _, v := range s.sizes {
			c = append(c, be32(v)...)
		}
		parts = append(parts, mkbox("stsz", fullbox(0, 0), be32(0), be32(uint32(len(s.sizes))), c))
	case 16:
		var c []byte
		for _, v := range s.sizes {
			c = append(c, be16(uint16(v))...)
		}
		parts = append(parts, mkbox("stz2", fullbox(0, 0), []byte{0, 0, 0, 16}, be32(uint32(len(s.sizes))), c))
	}
	stsc := [][]byte{be32(1), be32(1), be32(uint32(s.perChunk)), be32(1)}
	if rem := len(s.sizes) % s.perChunk; rem != 0 && len(s.sizes) > s.perChunk {
		stsc[0] = be32(2)
		stsc = append(stsc, be32(uint32(len(offsets))), be32(uint32(rem)), be32(1))
	}
	parts = append(parts, mkbox("stsc", append([][]byte{fullbox(0, 0)}, stsc...)...))
	if s.co64 {
		var c []byte
		for _, o := range offsets {
			c = append(c, be64(o)...)
		}
		parts = append(parts, mkbox("co64", fullbox(0, 0), be32(uint32(len(offsets))), c))
	} else {
		var c []byte
		for _, o := range offsets {
			c = append(c, be32(uint32(o))...)
		}
		parts = append(parts, mkbox("stco", fullbox(0, 0), be32(uint32(len(offsets))), c))
	}
	return mkbox("stbl", parts...)
}

func (s synth) trak(id uint32, handler string, stbl []byte) []byte {
	tkhd := []byte{}
	tkhd = append(tkhd, fullbox(0, 3)...)
	tkhd = append(tkhd, make([]byte, 8)...)
	tkhd = append(tkhd, be32(id)...)
	tkhd = append(tkhd, make([]byte, 8)...)
	tkhd = append(tkhd, make([]byte, 16)...)
	for _, m := range s.matrix {
		tkhd = append(tkhd, be32(uint32(m))...)
	}
	tkhd = append(tkhd, be32(uint32(s.w)<<16)...)
	tkhd = append(tkhd, be32(uint32(s.h)<<16)...)
	parts := [][]byte{mkbox("tkhd", tkhd)}
	if s.edits != nil && handler == "vide" {
		var e []byte
		for _, ed := range s.edits {
			e = append(append(append(e, be32(uint32(ed.Duration))...), be32(uint32(int32(ed.MediaTime)))...), be32(1<<16)...)
		}
		parts = append(parts, mkbox("edts", mkbox("elst", fullbox(0, 0), be32(uint32(len(s.edits))), e)))
	}
	mdhd := mkbox("mdhd", fullbox(0, 0), make([]byte, 8), be32(s.timescale), be32(0), be32(0))
	hdlr := mkbox("hdlr", fullbox(0, 0), be32(0), []byte(handler), make([]byte, 12), []byte("h\x00"))
	dref := mkbox("dinf", mkbox("dref", fullbox(0, 0), be32(1), mkbox("url ", fullbox(0, 1))))
	parts = append(parts, mkbox("mdia", mdhd, hdlr, mkbox("minf", dref, stbl)))
	return mkbox("trak", parts...)
}

func (s synth) moov(offsets []uint64) []byte {
	mvhd := mkbox("mvhd", fullbox(0, 0), make([]byte, 8), be32(1000), be32(0), make([]byte, 80))
	parts := [][]byte{mvhd}
	if s.audio {
		parts = append(parts, s.trak(2, "soun", mkbox("stbl")))
	}
	parts = append(parts, s.trak(1, s.handler, s.stbl(offsets)))
	if s.frag {
		parts = append(parts, mkbox("mvex", mkbox("trex", fullbox(0, 0), be32(1), be32(1), be32(512), be32(0), be32(0x10000))))
	}
	return mkbox("moov", parts...)
}

// chunkOffsets are where each chunk of perChunk samples starts, the
// media starting at base.
func (s synth) chunkOffsets(base uint64) []uint64 {
	var out []uint64
	off := base
	for i, n := range s.sizes {
		if i%s.perChunk == 0 {
			out = append(out, off)
		}
		off += uint64(n)
	}
	return out
}

// fragments is a moof and an mdat for each run from a sync sample.
func (s synth) fragments(at uint64) []byte {
	var out []byte
	starts := []int{0}
	for _, k := range s.sync {
		if k > 1 {
			starts = append(starts, int(k-1))
		}
	}
	starts = append(starts, len(s.sizes))
	var dts uint64
	for f := 0; f+1 < len(starts); f++ {
		a, b := starts[f], starts[f+1]
		var rows []byte
		for i := a; i < b; i++ {
			var cts int32
			if s.ctts != nil {
				cts = s.ctts[i]
			}
			flags := uint32(0x10000)
			if i == a {
				flags = 0
			}
			rows = append(rows, be32(s.deltas[i])...)
			rows = append(rows, be32(s.sizes[i])...)
			rows = append(rows, be32(flags)...)
			rows = append(rows, be32(uint32(cts))...)
		}
		build := func(dataOffset uint32) []byte {
			trun := mkbox("trun", fullbox(1, 0x000f01), be32(uint32(b-a)), be32(dataOffset), rows)
			tfhd := mkbox("tfhd", fullbox(0, 0x020000), be32(1))
			tfdt := mkbox("tfdt", fullbox(1, 0), be64(dts))
			return mkbox("moof", mkbox("mfhd", fullbox(0, 0), be32(uint32(f+1))), mkbox("traf", tfhd, tfdt, trun))
		}
		moof := build(0)
		moof = build(uint32(len(moof) + 8))
		var data []byte
		for i := a; i < b; i++ {
			data = append(data, bytes.Repeat([]byte{byte(i + 1)}, int(s.sizes[i]))...)
			dts += uint64(s.deltas[i])
		}
		out = append(out, moof...)
		out = append(out, mkbox("mdat", data)...)
	}
	_ = at
	return out
}

// bytes is the file.
func (s synth) bytes() []byte {
	s = s.defaults()
	ftyp := mkbox("ftyp", []byte("isom"), be32(512), []byte("isomiso2avc1mp41"))
	if s.frag {
		return append(append(ftyp, s.moov(nil)...), s.fragments(0)...)
	}
	data := s.data()
	if s.moovFirst {
		probe := s.moov(s.chunkOffsets(0))
		base := uint64(len(ftyp) + len(probe) + 8)
		return append(append(ftyp, s.moov(s.chunkOffsets(base))...), mkbox("mdat", data)...)
	}
	base := uint64(len(ftyp) + 8)
	return append(append(ftyp, mkbox("mdat", data)...), s.moov(s.chunkOffsets(base))...)
}
