package video

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/keys"
	"github.com/brandgw/brand/format/video/mp4"
)

// DefaultChunkBytes is the size a chunk of GOPs aims for when
// format.Options.ChunkBytes is 0 (package doc, "Chunks").
const DefaultChunkBytes = 8 << 20

// Label files beside a video are read whole; these bound them.
const (
	maxClsBytes  = 64
	maxJSONBytes = 1 << 20
)

// Format is a tree or bucket of video files (MP4, MOV, 3GP) with their labels,
// as a format.Format (package doc).
type Format struct{}

// Name is "video".
func (Format) Name() string { return "video" }

// ChecksumsByDefault implements format.DefaultChecksums: a packet
// damaged at rest decodes into other frames without an error, so an
// index records every GOP's CRC32C unless told not to (docs/format.md
// §6.8, "Damaged packets").
func (Format) ChecksumsByDefault() bool { return true }

// isVideo reports whether key names a video file this format reads: an
// ISO BMFF file, the one family package mp4 demuxes (MP4, QuickTime, and
// 3GPP's, which phones write).
func isVideo(key string) bool {
	switch strings.ToLower(path.Ext(key)) {
	case ".mp4", ".m4v", ".mov", ".3gp", ".3g2":
		return true
	}
	return false
}

// videoExts are isVideo's extensions, as the refusals name them.
const videoExts = ".mp4, .m4v, .mov, .3gp, .3g2"

// otherContainer returns the container a video file this format does not
// read is in, by its extension ("WebM" for x.webm), or "" for a key that
// names no video file. Package mp4 is the one demuxer the index has, and
// it reads ISO BMFF (MP4, MOV) alone: such files are recognised, so that
// a tree of them is refused naming their container rather than taken for
// another format's, and one beside MP4s is named as left out.
func otherContainer(key string) string {
	switch strings.ToLower(path.Ext(key)) {
	case ".webm":
		return "WebM"
	case ".mkv", ".mk3d":
		return "Matroska"
	case ".avi":
		return "AVI"
	case ".flv":
		return "FLV"
	case ".mpg", ".mpeg":
		return "MPEG program stream"
	case ".wmv", ".asf":
		return "ASF"
	case ".ogv":
		return "Ogg"
	}
	return ""
}

// remux is what to do about a video in a container the index does not
// read: its streams copied into MP4 as they are (H.264, H.265, VP9 and AV1
// are indexed there), not re-encoded.
const (
	remux     = "remux it to MP4 as it is (ffmpeg -i in.webm -c copy out.mp4)"
	remuxThem = "remux them to MP4 as they are (ffmpeg -i in.webm -c copy out.mp4)"
)

// Detect reports whether the listing holds video files, in a container
// this format reads or not (otherContainer), and is not a LeRobot dataset
// (meta/info.json), which format LeRobot reads.
func (Format) Detect(objs []format.Object) bool {
	videos := false
	for _, o := range objs {
		if o.Key == lerobotInfo {
			return false
		}
		videos = videos || isVideo(o.Key) || otherContainer(o.Key) != ""
	}
	return videos
}

// SkipsBad marks Format as a format.Skipper: with format.Options.SkipBad
// a video that cannot be indexed is left out, named.
func (Format) SkipsBad() {}

// Stats are what indexing read and how long it took.
type Stats struct {
	// Files is the videos indexed; Reads and BytesRead what reading their
	// metadata cost.
	Files     int
	Reads     int
	BytesRead int64
	// OtherBytes are the bytes of everything else read: labels beside the
	// videos, LeRobot's info.json and Parquet columns.
	OtherBytes int64
	// PerFile is each video's figures, in key order.
	PerFile []FileStats
	// Skipped are the video files left out, in key order, and why: those
	// in a container the index does not read, and with
	// format.Options.SkipBad those it could not index.
	Skipped []format.Skipped
	// Elapsed is the wall time of Index.
	Elapsed time.Duration
}

// FileStats are one video's indexing figures.
type FileStats struct {
	Key     string
	Size    int64
	Reads   int
	Bytes   int64
	Elapsed time.Duration
}

// Index reads each video's metadata (and the labels beside them) and
// describes the dataset: a chunk per run of GOPs, a sample per GOP.
func (f Format) Index(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*format.Layout, error) {
	d, stats, err := IndexFiles(ctx, st, objs, opt)
	if err != nil {
		return nil, err
	}
	lay, err := d.layout(nil)
	if err != nil {
		return nil, err
	}
	lay.Skipped = stats.Skipped
	return lay, nil
}

// Open returns the decoder of a tree of videos Index described.
func (Format) Open(meta []byte) (format.Decoder, error) {
	d, err := decodeMeta(meta)
	if err != nil {
		return nil, err
	}
	if d.Kind != "video" {
		return nil, fmt.Errorf("%w: a %s description opened as a tree of videos", format.ErrInvalid, d.Kind)
	}
	return open(d, nil)
}

// IndexFiles is Index, returning the description itself and what reading
// it cost.
func IndexFiles(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*Dataset, *Stats, error) {
	start := time.Now()
	if opt.Tokens != "" || opt.Text != "" {
		return nil, nil, fmt.Errorf("%w: a video dataset is not a token dataset (--tokens, --text)", format.ErrUnsupported)
	}
	if len(opt.Members) > 0 {
		return nil, nil, fmt.Errorf("%w: a video dataset's members are not renamed (--member)", format.ErrUnsupported)
	}
	byKey := map[string]format.Object{}
	var vids []format.Object
	var skipped []format.Skipped
	others := map[string]int{} // container → files
	for _, o := range objs {
		byKey[o.Key] = o
		if isVideo(o.Key) {
			vids = append(vids, o)
		} else if c := otherContainer(o.Key); c != "" {
			skipped = append(skipped, format.Skipped{Key: o.Key, Reason: c + ": a container the video index does not read (MP4, MOV and 3GP only); " + remux})
			others[c]++
		}
	}
	if len(vids) == 0 {
		if len(skipped) == 1 {
			return nil, nil, fmt.Errorf("%w: no video files the index reads (%s): %s is %s, a container package mp4, the index's one demuxer, does not read: %s",
				format.ErrUnsupported, videoExts, skipped[0].Key, otherContainer(skipped[0].Key), remux)
		}
		if len(skipped) > 0 {
			return nil, nil, fmt.Errorf("%w: no video files the index reads (%s): %s (%s first), whose containers package mp4, the index's one demuxer, does not read: %s",
				format.ErrUnsupported, videoExts, containers(others), skipped[0].Key, remuxThem)
		}
		return nil, nil, fmt.Errorf("%w: no video files (%s)", format.ErrInvalid, videoExts)
	}
	lim := opt.Limits.WithDefaults()
	index := make([]Video, len(vids))
	per := make([]FileStats, len(vids))
	var bad []error
	if opt.SkipBad {
		bad = make([]error, len(vids))
	}
	if err := indexVideos(ctx, st, vids, opt, index, per, bad); err != nil {
		return nil, nil, err
	}
	d := &Dataset{Kind: "video"}
	stats := &Stats{}
	var first format.Skipped // the first video that could not be indexed
	for i, o := range vids {
		if bad != nil && bad[i] != nil {
			sk := format.Skipped{Key: o.Key, Reason: bad[i].Error()}
			if first.Key == "" {
				first = sk
			}
			skipped = append(skipped, sk)
			continue
		}
		d.Videos = append(d.Videos, index[i])
		stats.PerFile = append(stats.PerFile, per[i])
	}
	slices.SortFunc(skipped, func(a, b format.Skipped) int { return strings.Compare(a.Key, b.Key) })
	stats.Files, stats.Skipped = len(d.Videos), skipped
	if len(d.Videos) == 0 {
		return nil, nil, fmt.Errorf("%w: none of the %d video files could be indexed (%s first: %s)", format.ErrInvalid, len(vids), first.Key, first.Reason)
	}
	other, err := labels(ctx, st, d, byKey, opt.Parallel)
	if err != nil {
		return nil, nil, err
	}
	stats.OtherBytes = other
	target := opt.ChunkBytes
	if target <= 0 {
		target = DefaultChunkBytes
	}
	for v := range d.Videos {
		if err := d.cut(v, 0, len(d.Videos[v].Track.GOPs), v, target, lim); err != nil {
			return nil, nil, err
		}
	}
	stats.add()
	stats.Elapsed = time.Since(start)
	return d, stats, nil
}

func (s *Stats) add() {
	for _, f := range s.PerFile {
		s.Reads += f.Reads
		s.BytesRead += f.Bytes
	}
}

// indexVideos indexes each of vids into out, opt.Parallel at a time.
// With bad not nil (format.Options.SkipBad) a video the index refuses
// (badFile) is not an error: bad[i] says why, and out[i] is left zero.
func indexVideos(ctx context.Context, st format.Store, vids []format.Object, opt format.Options, out []Video, stats []FileStats, bad []error) error {
	par := opt.Parallel
	if par <= 0 {
		par = 16
	}
	flim := opt.Limits.WithDefaults()
	lim := mp4.Limits{MetaBytes: flim.MetaBytes}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for i, o := range vids {
		g.Go(func() error {
			start := time.Now()
			f, err := mp4.Index(gctx, storeSource{st: st, obj: o}, o.Size, lim)
			if err == nil {
				err = gopsFit(o.Key, f.Video, flim)
			}
			if err != nil {
				if bad != nil && badFile(err) {
					bad[i] = err
					return nil
				}
				return fmt.Errorf("%s: %w", o.Key, err)
			}
			out[i] = Video{Key: o.Key, ETag: o.ETag, Size: o.Size, Label: -1, Track: f.Video}
			stats[i] = FileStats{Key: o.Key, Size: o.Size, Reads: f.Reads, Bytes: f.BytesRead, Elapsed: time.Since(start)}
			return nil
		})
	}
	return g.Wait()
}

// badFile reports whether err is the file's fault — not a video the
// index reads, truncated, damaged, unsupported, past a limit — rather
// than the store's or the caller's (unavailable, changed, canceled),
// which no file left out would mend.
func badFile(err error) bool {
	return errors.Is(err, format.ErrInvalid) || errors.Is(err, format.ErrUnsupported) || errors.Is(err, format.ErrDamaged)
}

// gopsFit refuses a track with a GOP larger than a chunk may be: cut
// would refuse it, after the labels were read.
func gopsFit(key string, tr mp4.Track, lim format.Limits) error {
	for g, gop := range tr.GOPs {
		if err := gopFits(key, g, gop.Bytes, lim); err != nil {
			return err
		}
	}
	return nil
}

// gopFits refuses GOP g of key, of n bytes, if it is larger than a chunk
// may be (with the room a chunk's member takes).
func gopFits(key string, g int, n int64, lim format.Limits) error {
	if n+8<<10 > lim.ChunkBytes {
		return fmt.Errorf("%w: %s: GOP %d is %d bytes, over the %d a chunk may be", format.ErrInvalid, key, g, n, lim.ChunkBytes)
	}
	return nil
}

// containers says how many files of each container counts holds, of
// two files or more, in their names' order ("1 Matroska and 2 WebM
// files").
func containers(counts map[string]int) string {
	names := slices.Sorted(maps.Keys(counts))
	parts := make([]string, len(names))
	for i, c := range names {
		parts[i] = fmt.Sprintf("%d %s", counts[c], c)
	}
	s := strings.Join(parts, ", ")
	if i := strings.LastIndex(s, ", "); i >= 0 {
		s = s[:i] + " and " + s[i+2:]
	}
	return s + " files"
}

// storeSource reads one object of a store for package mp4.
type storeSource struct {
	st  format.Store
	obj format.Object
}

func (s storeSource) ReadRange(ctx context.Context, off int64, p []byte) error {
	return s.st.ReadRange(ctx, s.obj.Key, s.obj.ETag, off, p)
}

// labels gives each video its label: the number in its .cls file, or,
// when no video has one and every video is in a folder, its folder's
// index among the class folders' sorted names (torchvision's
// ImageFolder and Kinetics convention); and the .json beside it. It
// returns the bytes read.
func labels(ctx context.Context, st format.Store, d *Dataset, byKey map[string]format.Object, parallel int) (int64, error) {
	type side struct {
		cls, js *format.Object
	}
	sides := make([]side, len(d.Videos))
	anyCls := false
	for i, v := range d.Videos {
		s := stem(v.Key)
		if o, ok := byKey[s+".cls"]; ok {
			sides[i].cls = &o
			anyCls = true
		}
		if o, ok := byKey[s+".json"]; ok {
			sides[i].js = &o
		}
	}
	var read int64
	sizes := make([]int64, len(d.Videos))
	if parallel <= 0 {
		parallel = 16
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range d.Videos {
		sd := sides[i]
		if sd.cls == nil && sd.js == nil {
			continue
		}
		g.Go(func() error {
			v := &d.Videos[i]
			if o := sd.cls; o != nil {
				if o.Size > maxClsBytes {
					return fmt.Errorf("%w: %s is %d bytes; a label file holds a class number (at most %d bytes)", format.ErrInvalid, o.Key, o.Size, maxClsBytes)
				}
				b := make([]byte, o.Size)
				if err := st.ReadRange(gctx, o.Key, o.ETag, 0, b); err != nil {
					return fmt.Errorf("video: reading %s: %w", o.Key, err)
				}
				n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
				if err != nil || n < 0 {
					return fmt.Errorf("%w: %s holds %q, not a class number", format.ErrInvalid, o.Key, b)
				}
				v.Label = n
				sizes[i] += o.Size
			}
			if o := sd.js; o != nil {
				if o.Size > maxJSONBytes {
					return fmt.Errorf("%w: %s is %d bytes; a video's .json is read whole, at most %d bytes", format.ErrInvalid, o.Key, o.Size, maxJSONBytes)
				}
				b := make([]byte, o.Size)
				if err := st.ReadRange(gctx, o.Key, o.ETag, 0, b); err != nil {
					return fmt.Errorf("video: reading %s: %w", o.Key, err)
				}
				if !json.Valid(b) {
					return fmt.Errorf("%w: %s is not JSON", format.ErrInvalid, o.Key)
				}
				v.JSON = b
				sizes[i] += o.Size
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	for _, n := range sizes {
		read += n
	}
	if anyCls {
		return read, nil
	}
	// Class folders: only when every video is in one.
	var names []string
	for _, v := range d.Videos {
		dir := path.Dir(v.Key)
		if dir == "." || dir == "/" {
			return read, nil
		}
		names = append(names, path.Base(dir))
	}
	slices.Sort(names)
	d.Classes = slices.Compact(names)
	if len(d.Classes) < 2 {
		// One folder is where the videos are, not a class.
		d.Classes = nil
		return read, nil
	}
	for i := range d.Videos {
		d.Videos[i].Label, _ = slices.BinarySearch(d.Classes, path.Base(path.Dir(d.Videos[i].Key)))
	}
	return read, nil
}

// cut cuts GOPs [first, end) of video v into chunks of about target
// bytes each, at GOP boundaries, of unit u, and appends them.
func (d *Dataset) cut(v, first, end, u int, target int64, lim format.Limits) error {
	vid := &d.Videos[v]
	if len(d.Chunks) == 0 || d.Chunks[len(d.Chunks)-1].Video != v {
		vid.Chunks[0] = len(d.Chunks)
	}
	for g := first; g < end; {
		ch := Chunk{Video: v, First: g, End: g, Unit: u}
		var n int64
		for ch.End < end {
			b := vid.Track.GOPs[ch.End].Bytes
			if ch.End > ch.First && (n+b > target || ch.End-ch.First >= lim.ChunkSamples) {
				break
			}
			if err := gopFits(vid.Key, ch.End, b, lim); err != nil {
				return err
			}
			n += b
			ch.End++
		}
		d.Chunks = append(d.Chunks, ch)
		g = ch.End
	}
	vid.Chunks[1] = len(d.Chunks)
	return nil
}

// layout is the format.Layout of d: rows' chunks first (a LeRobot
// dataset's Parquet layout), then the video chunks, each named by its
// GOPs ("g12-30") and keyed a GOP a sample.
func (d *Dataset) layout(rows *format.Layout) (*format.Layout, error) {
	lay := &format.Layout{}
	if rows != nil {
		lay.Chunks = append(lay.Chunks, rows.Chunks...)
		lay.Keys = append(lay.Keys, rows.Keys...)
	}
	for _, ch := range d.Chunks {
		v := &d.Videos[ch.Video]
		lay.Chunks = append(lay.Chunks, format.Chunk{
			Object: v.Key, ETag: v.ETag, Size: v.Size, Samples: ch.End - ch.First,
			Name: fmt.Sprintf("g%d-%d", ch.First, ch.End-1),
		})
		lay.Keys = keys.Append(lay.Keys, stem(v.Key), ch.First, ch.End-ch.First, keyWidth)
	}
	meta, err := d.encode()
	if err != nil {
		return nil, err
	}
	lay.Meta = meta
	return lay, nil
}
