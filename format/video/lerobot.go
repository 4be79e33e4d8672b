package video

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/format/video/mp4"
)

// The paths of a LeRobot v3 dataset (lerobot/datasets/utils.py).
const (
	lerobotInfo        = "meta/info.json"
	lerobotEpisodes    = "meta/episodes/"
	defaultDataPath    = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
	defaultVideoPath   = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
	maxInfoBytes       = 16 << 20
	defaultToleranceS  = 1e-4
	maxLeRobotRows     = 1 << 28
	maxLeRobotEpisodes = 1 << 24
)

// LeRobotFormat is a LeRobot v3 dataset as it is — meta/info.json,
// meta/episodes/…parquet, data/…parquet, videos/{camera}/…mp4 with many
// episodes a file — as a format.Format (package doc, "LeRobot").
type LeRobotFormat struct{}

// Name is "lerobot".
func (LeRobotFormat) Name() string { return "lerobot" }

// ChecksumsByDefault implements format.DefaultChecksums, as Format's:
// the cameras' GOPs, and with them the data files, are checksummed
// unless told not to.
func (LeRobotFormat) ChecksumsByDefault() bool { return true }

// Detect reports whether the listing is a LeRobot dataset: it has a
// meta/info.json and episodes' Parquet files.
func (LeRobotFormat) Detect(objs []format.Object) bool {
	info, eps := false, false
	for _, o := range objs {
		info = info || o.Key == lerobotInfo
		eps = eps || strings.HasPrefix(o.Key, lerobotEpisodes) && strings.HasSuffix(o.Key, ".parquet")
	}
	return info && eps
}

// Supersedes implements format.Supersedes: a LeRobot dataset's tables are
// Parquet files, and its videos MP4 files, which format/parquet and a
// tree of videos would each recognise alone.
func (LeRobotFormat) Supersedes() []string { return []string{"parquet", "video"} }

// Open returns the decoder of a LeRobot dataset Index described.
func (LeRobotFormat) Open(meta []byte) (format.Decoder, error) {
	d, err := decodeMeta(meta)
	if err != nil {
		return nil, err
	}
	if d.Kind != "lerobot" {
		return nil, fmt.Errorf("%w: a %s description opened as a LeRobot dataset", format.ErrInvalid, d.Kind)
	}
	rows, err := parquet.Format{}.Open(d.LeRobot.Parquet)
	if err != nil {
		return nil, fmt.Errorf("video: the LeRobot rows' Parquet description: %w", err)
	}
	return open(d, rows)
}

// Index reads info.json, the episodes' tables, the data files' footers
// and their index, episode_index and timestamp columns, and each video's
// metadata, and describes the dataset: the rows' chunks as format/parquet
// cuts them, then each camera file's GOPs cut at episodes.
func (f LeRobotFormat) Index(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*format.Layout, error) {
	d, rows, _, err := IndexLeRobot(ctx, st, objs, opt)
	if err != nil {
		return nil, err
	}
	return d.layout(rows)
}

// info is what Brand reads of meta/info.json.
type info struct {
	CodebaseVersion string  `json:"codebase_version"`
	FPS             float64 `json:"fps"`
	Features        map[string]struct {
		DType string `json:"dtype"`
	} `json:"features"`
	DataPath  string  `json:"data_path"`
	VideoPath *string `json:"video_path"`
}

// IndexLeRobot is Index, returning the description, the rows' Parquet
// layout and what reading cost.
func IndexLeRobot(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*Dataset, *format.Layout, *Stats, error) {
	start := time.Now()
	if opt.Tokens != "" || opt.Text != "" {
		return nil, nil, nil, fmt.Errorf("%w: a LeRobot dataset is not a token dataset (--tokens, --text)", format.ErrUnsupported)
	}
	lim := opt.Limits.WithDefaults()
	byKey := map[string]format.Object{}
	for _, o := range objs {
		byKey[o.Key] = o
	}
	stats := &Stats{}
	in, err := readInfo(ctx, st, byKey, lim, stats)
	if err != nil {
		return nil, nil, nil, err
	}
	l := &LeRobot{Version: in.CodebaseVersion, FPS: int(in.FPS)}
	for k, ft := range in.Features {
		if ft.DType == "video" {
			l.Cameras = append(l.Cameras, k)
		} else {
			l.Columns = append(l.Columns, k)
		}
	}
	slices.Sort(l.Cameras)
	slices.Sort(l.Columns)
	if len(l.Cameras) > 0 && in.VideoPath == nil {
		return nil, nil, nil, fmt.Errorf("%w: %s: video features %v and no video_path", format.ErrInvalid, lerobotInfo, l.Cameras)
	}

	// The episodes.
	eps, err := readEpisodes(ctx, st, objs, l.Cameras, lim, stats)
	if err != nil {
		return nil, nil, nil, err
	}

	// The rows: format/parquet's layout of the data files, and each row's
	// index, episode and timestamp.
	dataPath := in.DataPath
	if dataPath == "" {
		dataPath = defaultDataPath
	}
	var dataObjs []format.Object
	for _, o := range objs {
		if strings.HasPrefix(o.Key, "data/") && strings.HasSuffix(o.Key, ".parquet") {
			dataObjs = append(dataObjs, o)
		}
	}
	if len(dataObjs) == 0 {
		return nil, nil, nil, fmt.Errorf("%w: a LeRobot dataset without data/ Parquet files", format.ErrInvalid)
	}
	popt := opt
	popt.ChunkBytes = 0 // the rows' chunks are format/parquet's, at its size
	rowLay, err := parquet.Format{}.Index(ctx, st, dataObjs, popt)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the data files: %w", err)
	}
	l.RowChunks = len(rowLay.Chunks)
	l.Parquet = rowLay.Meta
	fileOf := map[string]int{}
	for _, ch := range rowLay.Chunks {
		i, ok := fileOf[ch.Object]
		if !ok {
			i = len(l.DataFiles)
			fileOf[ch.Object] = i
			l.DataFiles = append(l.DataFiles, DataFile{Key: ch.Object, FirstRow: l.Rows})
		}
		df := &l.DataFiles[i]
		df.ChunkRows = append(df.ChunkRows, ch.Samples)
		df.Rows += ch.Samples
		l.Rows += ch.Samples
	}
	// The chunks' indexes in the layout.
	at := 0
	for i := range l.DataFiles {
		df := &l.DataFiles[i]
		df.Chunks = [2]int{at, at + len(df.ChunkRows)}
		at += len(df.ChunkRows)
	}
	if l.Rows > maxLeRobotRows {
		return nil, nil, nil, fmt.Errorf("%w: %d rows; at most %d are read", format.ErrInvalid, l.Rows, maxLeRobotRows)
	}
	l.Timestamps = make([]float32, 0, l.Rows)
	episodeOfRow := make([]int32, 0, l.Rows)
	for _, df := range l.DataFiles {
		o := byKey[df.Key]
		cols, n, read, err := readColumns(ctx, st, o, []string{"index", "episode_index", "timestamp"}, lim)
		stats.OtherBytes += read
		if err != nil {
			return nil, nil, nil, err
		}
		if n != df.Rows {
			return nil, nil, nil, fmt.Errorf("%w: %s: %d rows read, %d in its footer", format.ErrInvalid, df.Key, n, df.Rows)
		}
		for i := range n {
			if idx := cols[0].int(i); idx != int64(df.FirstRow+i) {
				return nil, nil, nil, fmt.Errorf("%w: %s: row %d has index %d; Brand reads data files whose rows are the dataset's in order (index %d)", format.ErrUnsupported, df.Key, i, idx, df.FirstRow+i)
			}
			e := cols[1].int(i)
			if e < 0 || e > math.MaxInt32 {
				return nil, nil, nil, fmt.Errorf("%w: %s: row %d of episode %d", format.ErrInvalid, df.Key, i, e)
			}
			episodeOfRow = append(episodeOfRow, int32(e))
			l.Timestamps = append(l.Timestamps, float32(cols[2].float(i)))
		}
	}

	// Episodes against the rows.
	row := 0
	for i, e := range eps {
		switch {
		case e.From != row:
			return nil, nil, nil, fmt.Errorf("%w: episode %d starts at row %d; the one before ends at %d", format.ErrInvalid, e.Index, e.From, row)
		case e.To <= e.From || e.To > l.Rows:
			return nil, nil, nil, fmt.Errorf("%w: episode %d has rows [%d, %d) of %d", format.ErrInvalid, e.Index, e.From, e.To, l.Rows)
		}
		for r := e.From; r < e.To; r++ {
			if int(episodeOfRow[r]) != e.Index {
				return nil, nil, nil, fmt.Errorf("%w: row %d is of episode %d; the episodes' table puts it in episode %d", format.ErrInvalid, r, episodeOfRow[r], e.Index)
			}
		}
		key := formatPath(dataPath, map[string]any{"chunk_index": e.dataChunk, "file_index": e.dataFile, "episode_chunk": e.dataChunk})
		fi, ok := fileOf[key]
		if !ok {
			return nil, nil, nil, fmt.Errorf("%w: episode %d's data file %s is not in the dataset", format.ErrInvalid, e.Index, key)
		}
		df := l.DataFiles[fi]
		if e.From < df.FirstRow || e.To > df.FirstRow+df.Rows {
			return nil, nil, nil, fmt.Errorf("%w: episode %d's rows [%d, %d) are not all in its data file %s", format.ErrInvalid, e.Index, e.From, e.To, key)
		}
		eps[i].Data = fi
		row = e.To
	}
	if row != l.Rows {
		return nil, nil, nil, fmt.Errorf("%w: the episodes hold %d rows, the data files %d", format.ErrInvalid, row, l.Rows)
	}

	// The videos: each camera's files the episodes name.
	d := &Dataset{Kind: "lerobot", LeRobot: l}
	videoIndex := map[string]int{}
	var vids []format.Object
	var cams []string
	for _, e := range eps {
		for k, cam := range l.Cameras {
			key := formatPath(*in.VideoPath, map[string]any{"video_key": cam, "chunk_index": e.videos[k].chunk, "file_index": e.videos[k].file})
			if _, ok := videoIndex[key]; ok {
				continue
			}
			o, ok := byKey[key]
			if !ok {
				return nil, nil, nil, fmt.Errorf("%w: episode %d's video %s is not in the dataset", format.ErrInvalid, e.Index, key)
			}
			videoIndex[key] = -1
			vids = append(vids, o)
			cams = append(cams, cam)
		}
	}
	order := make([]int, len(vids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(vids[a].Key, vids[b].Key) })
	sorted := make([]format.Object, len(vids))
	for i, j := range order {
		sorted[i] = vids[j]
		videoIndex[vids[j].Key] = i
	}
	d.Videos = make([]Video, len(sorted))
	stats.Files = len(sorted)
	stats.PerFile = make([]FileStats, len(sorted))
	if err := indexVideos(ctx, st, sorted, opt, d.Videos, stats.PerFile, nil); err != nil {
		return nil, nil, nil, err
	}
	for i, j := range order {
		d.Videos[i].Camera = cams[j]
	}
	for i := range eps {
		e := &eps[i]
		e.Videos = make([]EpisodeVideo, len(l.Cameras))
		for k, cam := range l.Cameras {
			key := formatPath(*in.VideoPath, map[string]any{"video_key": cam, "chunk_index": e.videos[k].chunk, "file_index": e.videos[k].file})
			e.Videos[k] = EpisodeVideo{Video: videoIndex[key], From: e.videos[k].from, To: e.videos[k].to}
		}
		l.Episodes = append(l.Episodes, e.Episode)
	}

	d.alignEpisodes()
	// Each camera file's GOPs, cut at its episodes.
	target := opt.ChunkBytes
	if target <= 0 {
		target = DefaultChunkBytes
	}
	for v := range d.Videos {
		if err := d.cutEpisodes(v, target, lim); err != nil {
			return nil, nil, nil, err
		}
	}
	if err := d.checkFrames(defaultToleranceS); err != nil {
		return nil, nil, nil, err
	}
	stats.add()
	stats.Elapsed = time.Since(start)
	return d, rowLay, stats, nil
}

// readInfo reads and checks meta/info.json.
func readInfo(ctx context.Context, st format.Store, byKey map[string]format.Object, lim format.Limits, stats *Stats) (*info, error) {
	o, ok := byKey[lerobotInfo]
	if !ok {
		return nil, fmt.Errorf("%w: no %s: not a LeRobot dataset", format.ErrInvalid, lerobotInfo)
	}
	if o.Size > min(maxInfoBytes, lim.MetaBytes) {
		return nil, fmt.Errorf("%w: %s is %d bytes; at most %d are read", format.ErrInvalid, o.Key, o.Size, min(maxInfoBytes, lim.MetaBytes))
	}
	b := make([]byte, o.Size)
	if err := st.ReadRange(ctx, o.Key, o.ETag, 0, b); err != nil {
		return nil, fmt.Errorf("video: reading %s: %w", o.Key, err)
	}
	stats.OtherBytes += o.Size
	var in info
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", format.ErrInvalid, o.Key, err)
	}
	if !strings.HasPrefix(in.CodebaseVersion, "v3.") {
		if in.CodebaseVersion == "" {
			in.CodebaseVersion = "without a codebase_version"
		}
		return nil, fmt.Errorf("%w: a LeRobot dataset %s; Brand reads v3.0 (convert with python -m lerobot.scripts.convert_dataset_v21_to_v30)", format.ErrUnsupported, in.CodebaseVersion)
	}
	if in.FPS <= 0 || in.FPS != math.Trunc(in.FPS) || in.FPS > 1000 {
		return nil, fmt.Errorf("%w: %s: fps %v", format.ErrInvalid, o.Key, in.FPS)
	}
	return &in, nil
}

// episode is an episode as its table row states it.
type episode struct {
	Episode
	dataChunk, dataFile int64
	videos              []episodeVideo
}

type episodeVideo struct {
	chunk, file int64
	from, to    float64
}

// readEpisodes reads the columns Brand needs of every meta/episodes
// Parquet file, in key order, and returns the episodes sorted by index.
func readEpisodes(ctx context.Context, st format.Store, objs []format.Object, cameras []string, lim format.Limits, stats *Stats) ([]episode, error) {
	names := []string{"episode_index", "dataset_from_index", "dataset_to_index", "data/chunk_index", "data/file_index"}
	for _, c := range cameras {
		names = append(names, "videos/"+c+"/chunk_index", "videos/"+c+"/file_index", "videos/"+c+"/from_timestamp", "videos/"+c+"/to_timestamp")
	}
	var eps []episode
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, lerobotEpisodes) || !strings.HasSuffix(o.Key, ".parquet") {
			continue
		}
		cols, n, read, err := readColumns(ctx, st, o, names, lim)
		stats.OtherBytes += read
		if err != nil {
			return nil, err
		}
		if len(eps)+n > maxLeRobotEpisodes {
			return nil, fmt.Errorf("%w: more than %d episodes", format.ErrInvalid, maxLeRobotEpisodes)
		}
		for i := range n {
			e := episode{
				Episode:   Episode{Index: int(cols[0].int(i)), From: int(cols[1].int(i)), To: int(cols[2].int(i))},
				dataChunk: cols[3].int(i), dataFile: cols[4].int(i),
			}
			for k := range cameras {
				c := cols[5+4*k:]
				ev := episodeVideo{chunk: c[0].int(i), file: c[1].int(i), from: c[2].float(i), to: c[3].float(i)}
				if !(ev.from >= 0) || !(ev.to > ev.from) || math.IsInf(ev.to, 0) {
					return nil, fmt.Errorf("%w: %s: episode %d's %s spans [%v, %v) s", format.ErrInvalid, o.Key, e.Index, cameras[k], ev.from, ev.to)
				}
				e.videos = append(e.videos, ev)
			}
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("%w: no episodes in %s*.parquet", format.ErrInvalid, lerobotEpisodes)
	}
	slices.SortStableFunc(eps, func(a, b episode) int { return a.Index - b.Index })
	for i := 1; i < len(eps); i++ {
		if eps[i].Index == eps[i-1].Index {
			return nil, fmt.Errorf("%w: episode %d is in the episodes' tables twice", format.ErrInvalid, eps[i].Index)
		}
	}
	return eps, nil
}

// pathField is one {name} or {name:03d} of a LeRobot path template.
var pathField = regexp.MustCompile(`\{([a-z_]+)(?::0?(\d+)d)?\}`)

// formatPath fills a LeRobot path template (a Python format string of
// {name} and {name:03d} fields) with vals.
func formatPath(tmpl string, vals map[string]any) string {
	return pathField.ReplaceAllStringFunc(tmpl, func(m string) string {
		sub := pathField.FindStringSubmatch(m)
		v, ok := vals[sub[1]]
		if !ok {
			return m
		}
		switch x := v.(type) {
		case int64:
			s := strconv.FormatInt(x, 10)
			if w, _ := strconv.Atoi(sub[2]); len(s) < w {
				s = strings.Repeat("0", w-len(s)) + s
			}
			return s
		case string:
			return x
		}
		return m
	})
}

// cutEpisodes cuts video v's GOPs into chunks at its episodes: each GOP
// belongs to the episode its first frame shown is in (or the first one,
// before it), and each episode's GOPs are cut at about target bytes.
func (d *Dataset) cutEpisodes(v int, target int64, lim format.Limits) error {
	l := d.LeRobot
	t := &d.Videos[v].Track
	type span struct {
		ep, cam int
		from    float64
	}
	var spans []span
	for e, ep := range l.Episodes {
		for k, ev := range ep.Videos {
			if ev.Video == v {
				spans = append(spans, span{e, k, ev.From})
			}
		}
	}
	slices.SortStableFunc(spans, func(a, b span) int {
		switch {
		case a.from < b.from:
			return -1
		case a.from > b.from:
			return 1
		}
		return 0
	})
	// The time each GOP starts being shown.
	starts := make([]float64, len(t.GOPs))
	for g, gp := range t.GOPs {
		s := math.Inf(1)
		for i := gp.First; i < gp.End; i++ {
			if smp := t.Samples[i]; !smp.Discard {
				s = min(s, t.Seconds(smp.PTS))
			}
		}
		starts[g] = s
	}
	half := 0.5 / float64(l.FPS)
	g := 0
	for i, sp := range spans {
		end := len(t.GOPs)
		if i+1 < len(spans) {
			end = g
			for end < len(t.GOPs) && starts[end] < spans[i+1].from-half {
				end++
			}
		}
		before := len(d.Chunks)
		if err := d.cut(v, g, end, sp.ep, target, lim); err != nil {
			return err
		}
		l.Episodes[sp.ep].Videos[sp.cam].Chunks = [2]int{before, len(d.Chunks)}
		g = end
	}
	return nil
}

// NearestFrame returns the frame of video v shown nearest to t seconds
// (the earlier of two as near), as LeRobot's decoders pick a query's
// frame, and how far it is.
func (d *Dataset) NearestFrame(v int, t float64) (frame int, dist float64) {
	tr := &d.Videos[v].Track
	fs := tr.Frames
	i, _ := slices.BinarySearchFunc(fs, t, func(f mp4.Frame, t float64) int {
		switch s := tr.Seconds(f.PTS); {
		case s < t:
			return -1
		case s > t:
			return 1
		}
		return 0
	})
	best, bd := -1, math.Inf(1)
	for _, j := range []int{i - 1, i} {
		if j >= 0 && j < len(fs) {
			if dd := math.Abs(tr.Seconds(fs[j].PTS) - t); dd < bd {
				best, bd = j, dd
			}
		}
	}
	return best, bd
}

// alignEpisodes moves each episode's span of each camera file to its
// first frame, where that frame is shown less than half a frame from the
// from_timestamp the episodes' table gives: files joined with FFmpeg's
// concat demuxer (5.1) start each episode after the first a little after
// the durations before it, which from_timestamp records — at 30 fps 0.3
// to 0.7 ms later each, adding up along the file — where LeRobot's
// tolerance_s is 0.1 ms. Within an episode, every row is still held to
// tolerance_s of its frame (checkFrames): the rows must be in step with
// the frames, and only the episode's start is matched to the nearest
// frame, as the join rounded it. A start half a frame or more from any
// frame is left as it is, and refused by checkFrames.
func (d *Dataset) alignEpisodes() {
	l := d.LeRobot
	half := 0.5 / float64(l.FPS)
	for _, e := range l.Episodes {
		if e.To <= e.From {
			continue
		}
		for k := range e.Videos {
			ev := &e.Videos[k]
			q := ev.From + float64(l.Timestamps[e.From])
			f, dist := d.NearestFrame(ev.Video, q)
			if f < 0 || dist >= half {
				continue
			}
			tr := &d.Videos[ev.Video].Track
			shift := tr.Seconds(tr.Frames[f].PTS) - q
			ev.From += shift
			ev.To += shift
		}
	}
}

// checkFrames checks that every row of every episode has, in each
// camera's file, a frame within tol seconds of its timestamp: where
// LeRobot's loader would fail a sample (its tolerance_s), the index is
// refused, naming the first such row.
func (d *Dataset) checkFrames(tol float64) error {
	l := d.LeRobot
	for _, e := range l.Episodes {
		for k, ev := range e.Videos {
			for r := e.From; r < e.To; r++ {
				q := ev.From + float64(l.Timestamps[r])
				f, dist := d.NearestFrame(ev.Video, q)
				if f < 0 || dist > tol {
					near := math.NaN()
					if f >= 0 {
						tr := &d.Videos[ev.Video].Track
						near = tr.Seconds(tr.Frames[f].PTS)
					}
					return fmt.Errorf("%w: episode %d, camera %s: row %d (%.6f s in %s) has no frame within %g s (the nearest is at %.6f s): the rows and the video are out of sync", format.ErrInvalid, e.Index, l.Cameras[k], r, q, path.Base(d.Videos[ev.Video].Key), tol, near)
				}
			}
		}
	}
	return nil
}
