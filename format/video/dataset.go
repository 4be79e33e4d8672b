package video

import (
	"github.com/brandgw/brand/format/video/mp4"
)

// Dataset is a video dataset's description: what Index found, which Open
// reads back from the Meta it wrote, and what package clips draws clip
// samples from. It is immutable once made: share it, never write it.
type Dataset struct {
	// Kind is the format's name: "video" or "lerobot".
	Kind string
	// Videos are the video files, in key order.
	Videos []Video
	// Chunks are the video chunks (runs of GOPs), in layout order. A
	// LeRobot dataset's layout has its Parquet rows' chunks first
	// (LeRobot.RowChunks of them); chunk c of the layout is then
	// Chunks[c-LeRobot.RowChunks].
	Chunks []Chunk
	// Classes are the class folders' names, sorted, when the labels are
	// folder names (a video's Label is its folder's index here).
	Classes []string
	// LeRobot is a LeRobot dataset's episodes and rows; nil otherwise.
	LeRobot *LeRobot
}

// Video is one video file and its indexed video track.
type Video struct {
	// Key, ETag and Size are the object's.
	Key  string
	ETag string
	Size int64
	// Camera is the LeRobot camera (video feature) the file is of, "" in
	// a tree of videos.
	Camera string
	// Label is the video's class: its .cls file's number, or its class
	// folder's index in Dataset.Classes; -1 without one.
	Label int
	// JSON is the .json file beside the video, as it is, when there is one.
	JSON []byte `json:",omitempty"`
	// Track is the indexed video track: Samples, and the Frames and GOPs
	// derived from them (mp4.Derive).
	Track mp4.Track
	// Chunks are the video's chunks [First, End) in Dataset.Chunks.
	Chunks [2]int
}

// Chunk is a run of consecutive GOPs of one video.
type Chunk struct {
	// Video is the index of its video in Dataset.Videos.
	Video int
	// First and End are its GOPs [First, End) of the video's track.
	First, End int
	// Unit is what the chunk's samples are owned with: its video in a tree
	// of videos, its episode (an index in LeRobot.Episodes) in a LeRobot
	// dataset. A cluster places a unit's chunks on one node.
	Unit int
}

// LeRobot is a LeRobot v3 dataset's tables, as its meta/info.json and
// meta/episodes Parquet files state them, and each row's timestamp.
type LeRobot struct {
	// Version is info.json's codebase_version ("v3.0").
	Version string
	// FPS is info.json's fps: the rate of rows and frames.
	FPS int
	// Cameras are the video features' keys ("observation.images.top"),
	// sorted; Columns the other features' (the data files' columns:
	// "action", "observation.state", "timestamp", ...), sorted.
	Cameras []string
	Columns []string
	// Episodes in episode order; their rows are consecutive.
	Episodes []Episode
	// Rows is the number of rows (frames) of the dataset.
	Rows int
	// Timestamps is each row's timestamp column (seconds in its episode),
	// by global index; it is encoded apart from the JSON of the rest.
	Timestamps []float32 `json:"-"`
	// DataFiles are the data/ Parquet files, in key order.
	DataFiles []DataFile
	// RowChunks is the number of the layout's chunks that are Parquet
	// rows' (the first ones); Parquet is their description, which
	// format/parquet's Open reads.
	RowChunks int
	Parquet   []byte `json:"-"`
}

// Episode is one episode: its rows and its span of each camera's file.
type Episode struct {
	// Index is its episode_index.
	Index int
	// From and To are its rows [From, To) by global index
	// (dataset_from_index, dataset_to_index).
	From, To int
	// Data is its rows' file in LeRobot.DataFiles.
	Data int
	// Videos are its spans of each camera's file, in Cameras' order.
	Videos []EpisodeVideo
}

// EpisodeVideo is an episode's span of one camera's file.
type EpisodeVideo struct {
	// Video is the file, an index in Dataset.Videos.
	Video int
	// From and To are the episode's times in the file, in seconds
	// (videos/{camera}/from_timestamp and to_timestamp).
	From, To float64
	// Chunks are the episode's chunks of this file [First, End) in
	// Dataset.Chunks: the GOPs whose sync sample is shown within the
	// span.
	Chunks [2]int
}

// DataFile is one data/ Parquet file: which global rows it holds and in
// which of the layout's chunks.
type DataFile struct {
	Key string
	// FirstRow is the global index of its first row, Rows its rows.
	FirstRow, Rows int
	// Chunks are its chunks [First, End) in the layout (format/parquet's
	// chunks of the file, in order).
	Chunks [2]int
	// ChunkRows is each of its chunks' rows, in order.
	ChunkRows []int
}

// Row returns where global row r is: the layout's chunk holding it and
// its sample in that chunk, or ok false for a row the dataset does not
// have.
func (l *LeRobot) Row(r int) (chunk, sample int, ok bool) {
	if r < 0 || r >= l.Rows {
		return 0, 0, false
	}
	lo, hi := 0, len(l.DataFiles)
	for lo < hi {
		m := (lo + hi) / 2
		if l.DataFiles[m].FirstRow+l.DataFiles[m].Rows <= r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(l.DataFiles) || r < l.DataFiles[lo].FirstRow {
		return 0, 0, false
	}
	f := &l.DataFiles[lo]
	at := r - f.FirstRow
	for i, n := range f.ChunkRows {
		if at < n {
			return f.Chunks[0] + i, at, true
		}
		at -= n
	}
	return 0, 0, false
}

// EpisodeOf returns the episode holding global row r, or -1.
func (l *LeRobot) EpisodeOf(r int) int {
	lo, hi := 0, len(l.Episodes)
	for lo < hi {
		m := (lo + hi) / 2
		if l.Episodes[m].To <= r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(l.Episodes) || r < l.Episodes[lo].From {
		return -1
	}
	return lo
}

// Layout returns the index in Dataset.Chunks of the layout's chunk c, or
// -1 for a chunk of Parquet rows.
func (d *Dataset) Layout(c int) int {
	if d.LeRobot != nil {
		c -= d.LeRobot.RowChunks
	}
	return c
}

// ChunkOf returns the layout's chunk holding GOP g of video v.
func (d *Dataset) ChunkOf(v, g int) int {
	cs := d.Videos[v].Chunks
	lo, hi := cs[0], cs[1]
	for lo < hi {
		m := (lo + hi) / 2
		if d.Chunks[m].End <= g {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if d.LeRobot != nil {
		return lo + d.LeRobot.RowChunks
	}
	return lo
}
