package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/internal/gen/photos"
)

// The vision benchmark's data, made deterministically from a seed: a
// VLM-like set of image-text samples in WebDataset tar shards, and a
// text corpus in Parquet for the tokenizers' figure.
//
// A sample is one of four kinds, drawn as a LLaVA-style pre-training and
// instruction mix spreads them:
//
//	55 %  a caption: KEY.txt (8 to 40 words) and KEY.jpg, the image
//	      before its caption (no placeholder)
//	25 %  a conversation: KEY.json, LLaVA's {"conversations": [...]},
//	      "<image>\n" and a question, then the answer (10 to 80 words),
//	      one or two rounds; one image (two in one in ten)
//	13 %  interleaved: KEY.txt with 2 to 4 "<image>" each followed by 5
//	      to 20 words, KEY.0.jpg, KEY.1.png, …
//	 7 %  text alone: KEY.txt of 50 to 300 words
//
// Images are internal/gen/photos' photo-like JPEGs (quality 75 to 95), one
// in four re-encoded as PNG; each side drawn log-uniformly between
// MinSide and MaxSide, the aspect between 1:2 and 2:1, so that their
// vision tokens under a dynamic rule spread over two orders of
// magnitude as a real set's do.

// visionWords are the texts' words, drawn Zipf-like (earlier words
// oftener); visionPhrases are lines in other scripts mixed in.
var visionWords = strings.Fields(`the a of and in on with is at to this that an image photo picture shows
there are two three people man woman child dog cat bird car street building tree sky water river mountain
red blue green white black yellow small large old new wooden stone glass near behind next front left right
sitting standing walking running holding looking wearing playing eating table chair window door road field
grass snow light dark bright sunny cloudy evening morning night city park beach room kitchen food plate cup
what where how many does do color kind describe detail answer question yes no because it its they their
one some several group background foreground center corner side top bottom close view scene appears seems
likely probably clearly visible show shown made using used between under over above below around through`)

var visionPhrases = []string{
	"Ein Hund läuft über die Wiese.", "Сравните два изображения.", "写真の中の山と川。", "一只猫坐在垫子上。",
	"Le chat dort sur le canapé.", "El niño juega en el parque.", "사진 속의 바다와 하늘.", "الصورة تظهر مدينة كبيرة.",
	"def area(w, h):\n    return w * h", "🐕 🌳 ☀️",
}

// visionText is n words drawn from r, with now and then a phrase of
// another script, and sentences ended.
func visionText(r *rand.Rand, n int) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		if r.IntN(40) == 0 {
			sb.WriteString(visionPhrases[r.IntN(len(visionPhrases))])
			continue
		}
		// Zipf-like: the index is the floor of a log-uniform draw.
		k := int(math.Exp(r.Float64()*math.Log(float64(len(visionWords)+1)))) - 1
		sb.WriteString(visionWords[min(k, len(visionWords)-1)])
		if r.IntN(12) == 0 {
			sb.WriteByte('.')
		}
	}
	return sb.String()
}

// visionSet describes the image-text samples.
type visionSet struct {
	Samples, Shards  int
	MinSide, MaxSide int
	Seed             uint64
}

// visionSample is one generated sample: its members by extension
// (txt, json, jpg, 0.jpg, 1.png, …) in the order written, and its images'
// stored sizes.
type visionSample struct {
	Key     string
	Exts    []string
	Data    [][]byte
	Sizes   [][2]int // w, h
	Kind    string
	TextLen int // bytes of its text members
}

// Sample kinds.
const (
	visCaption     = "caption"
	visChat        = "conversation"
	visInterleaved = "interleaved"
	visText        = "text"
)

// sample makes sample i.
func (v visionSet) sample(i int) (visionSample, error) {
	r := rand.New(rand.NewPCG(v.Seed, uint64(i)))
	s := visionSample{Key: fmt.Sprintf("s%07d", i)}
	images := 0
	var text string
	switch u := r.Float64(); {
	case u < 0.55:
		s.Kind, images = visCaption, 1
		text = visionText(r, 8+r.IntN(33))
	case u < 0.80:
		s.Kind, images = visChat, 1
		if r.IntN(10) == 0 {
			images = 2
		}
		var turns []map[string]string
		for round := range 1 + r.IntN(2) {
			q := visionText(r, 4+r.IntN(9)) + "?"
			if round == 0 {
				q = strings.Repeat("<image>\n", images) + q
			}
			turns = append(turns, map[string]string{"from": "human", "value": q},
				map[string]string{"from": "gpt", "value": visionText(r, 10+r.IntN(71))})
		}
		b, err := json.Marshal(map[string]any{"conversations": turns})
		if err != nil {
			return s, err
		}
		text = string(b)
	case u < 0.93:
		s.Kind, images = visInterleaved, 2+r.IntN(3)
		var sb strings.Builder
		for k := range images {
			if k > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString("<image> " + visionText(r, 5+r.IntN(16)))
		}
		text = sb.String()
	default:
		s.Kind = visText
		text = visionText(r, 50+r.IntN(251))
	}
	for k := range images {
		// Sides log-uniform in [MinSide, MaxSide], the aspect in [1/2, 2].
		side := float64(v.MinSide) * math.Exp(r.Float64()*math.Log(float64(v.MaxSide)/float64(v.MinSide)))
		aspect := math.Exp((r.Float64()*2 - 1) * math.Ln2)
		w := max(v.MinSide, int(side*math.Sqrt(aspect)))
		h := max(v.MinSide, int(side/math.Sqrt(aspect)))
		p, err := photos.Sized(v.Seed^0x766973, i*8+k, w, h, 75+r.IntN(21))
		if err != nil {
			return s, err
		}
		ext, data := "jpg", p.JPEG
		if r.IntN(4) == 0 {
			m, err := jpeg.Decode(bytes.NewReader(p.JPEG))
			if err != nil {
				return s, err
			}
			var b bytes.Buffer
			if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, m); err != nil {
				return s, err
			}
			ext, data = "png", b.Bytes()
		}
		if images > 1 {
			ext = fmt.Sprintf("%d.%s", k, ext)
		}
		s.Exts, s.Data, s.Sizes = append(s.Exts, ext), append(s.Data, data), append(s.Sizes, [2]int{w, h})
	}
	textExt := "txt"
	if s.Kind == visChat {
		textExt = "json"
	}
	s.Exts, s.Data, s.TextLen = append([]string{textExt}, s.Exts...), append([][]byte{[]byte(text)}, s.Data...), len(text)
	return s, nil
}

// shardSamples is the range of samples shard k holds.
func (v visionSet) shardSamples(k int) (lo, hi int) {
	per := (v.Samples + v.Shards - 1) / v.Shards
	return min(k*per, v.Samples), min((k+1)*per, v.Samples)
}

// visionShardStats counts what a shard holds.
type visionShardStats struct {
	Samples, Images, Pixels int64
	ImageBytes, TextBytes   int64
	Kinds                   map[string]int
}

func (a *visionShardStats) add(b visionShardStats) {
	a.Samples, a.Images, a.Pixels, a.ImageBytes, a.TextBytes = a.Samples+b.Samples, a.Images+b.Images, a.Pixels+b.Pixels, a.ImageBytes+b.ImageBytes, a.TextBytes+b.TextBytes
	if a.Kinds == nil {
		a.Kinds = map[string]int{}
	}
	for k, n := range b.Kinds {
		a.Kinds[k] += n
	}
}

// shard writes shard k as a tar: each sample's members KEY.EXT in order,
// mode 0644, no owner, no time, each header archive/tar's choice
// (ustar.AppendHeader).
func (v visionSet) shard(k int) ([]byte, visionShardStats, error) {
	st := visionShardStats{Kinds: map[string]int{}}
	var b []byte
	var zeros [2 * ustar.BlockSize]byte // a member's padding; twice, the end of the archive
	lo, hi := v.shardSamples(k)
	for i := lo; i < hi; i++ {
		s, err := v.sample(i)
		if err != nil {
			return nil, st, err
		}
		for j, ext := range s.Exts {
			n := int64(len(s.Data[j]))
			if b, err = ustar.AppendHeader(b, ustar.Header{Name: s.Key + "." + ext, Size: n, Mode: 0o644, Format: ustar.Any}); err != nil {
				return nil, st, err
			}
			b = append(b, s.Data[j]...)
			b = append(b, zeros[:ustar.Padded(n)-n]...)
			if j > 0 {
				st.ImageBytes += int64(len(s.Data[j]))
			}
		}
		st.Samples++
		st.Images += int64(len(s.Sizes))
		for _, wh := range s.Sizes {
			st.Pixels += int64(wh[0] * wh[1])
		}
		st.TextBytes += int64(s.TextLen)
		st.Kinds[s.Kind]++
	}
	return append(b, zeros[:]...), st, nil
}

// textSchema is the tokenizers' corpus: one string column.
var textSchema = arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)

// textCorpus writes docs documents of visionText (median about 200
// words, log-normal) as one Parquet file, rowGroup rows a row group, and
// returns it with the text's bytes.
func textCorpus(docs, rowGroup int, seed uint64) ([]byte, int64, error) {
	r := rand.New(rand.NewPCG(seed, 0x74657874))
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(textSchema, &buf, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, 0, err
	}
	var text int64
	for lo := 0; lo < docs; lo += rowGroup {
		b := array.NewRecordBuilder(memory.DefaultAllocator, textSchema)
		sb := b.Field(0).(*array.StringBuilder)
		for range min(rowGroup, docs-lo) {
			n := min(max(int(math.Round(200*math.Exp(0.8*r.NormFloat64()))), 5), 4000)
			s := visionText(r, n)
			text += int64(len(s))
			sb.Append(s)
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			return nil, 0, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), text, nil
}
