// Package video serves video datasets in place, behind the format seam
// (package format): a tree or bucket of video files (MP4, MOV, 3GP) with
// their labels, as Format ("video"), and LeRobot v3 robot-learning
// datasets as they are, as LeRobotFormat ("lerobot"). Its index is the
// keyframe-group index of each file (package mp4): every frame's
// timestamps and bytes, grouped into GOPs, read from the files' metadata
// alone. Package clips draws clip samples from it.
//
// # Why GOPs
//
// A frame can only be decoded from the sync sample (keyframe) before it,
// through every sample after that in decode order — B-frames included.
// Every loader today fetches a whole MP4 (or a range its own index finds)
// per worker, decodes from the keyframe and throws the rest away. Brand
// knows the order of an epoch in advance, so it knows every GOP a window
// of clips needs before it reads a byte: the GOP is the unit a clip's read
// is made of, and what the cache holds.
//
// # Chunks
//
// A chunk is a run of consecutive GOPs of one video file, cut at GOP
// boundaries when the next GOP would take it past format.Options.ChunkBytes
// (DefaultChunkBytes, 8 MiB, when 0; `brand index --chunk-size`), and never
// across files (a GOP larger than that is a chunk alone). A chunk is named
// by its GOPs ("clip.mp4#g12-30") and read as its GOPs' byte ranges,
// adjacent ones merged: the other tracks' samples between them (an
// interleaved audio track) are not read. Why a run of GOPs and not a GOP:
// GOPs are a few KB to a few MB (LeRobot encodes a keyframe every 2
// frames: a GOP of 2 frames), and a read costs the store a request; a
// whole short video (a Kinetics clip of 10 s is 1–2 MB) is one chunk, and
// a long file is cut near the size Brand's other chunks are read at.
// Why not larger: a job that draws one clip of a long video an epoch
// reads the chunks its clip's GOPs are in, so its store bytes are at most
// a chunk more than the GOPs' on each side; a smaller --chunk-size brings
// that nearer the GOPs' bytes at the cost of more requests.
//
// In a LeRobot dataset a camera's file holds many episodes: its GOPs are
// cut at episodes first (a GOP belongs to the episode its first frame
// shown is in), then at ChunkBytes, so that a chunk's GOPs are one
// episode's. The episode is the unit of ownership (Chunk.Unit,
// Decoder.Unit): its rows' chunk and its cameras' chunks are what one
// sample reads, so a cluster places a unit's chunks on one node.
//
// # Samples, keys, members
//
// A chunk's samples are its GOPs, keyed by the file's key without its
// extension and the GOP's number in the file, zero-padded to six digits:
// "train/abseiling/x/000012". Each has one member, ".gop": the GOP's
// samples' bytes as they are in the file (its ranges back to back, in
// file order; Video.GOPSample finds a sample in it). A GOP's bytes are not
// changed or decoded here; the decoder reads them with the track's
// extradata (mp4.Track.Extradata) and its samples' timestamps from the
// description. Decoding a chunk checks that each H.264 or H.265 sample is
// length-prefixed NAL units filling it exactly, else the chunk is damaged
// (format.ErrDamaged). The resident bound is exact: the GOPs' bytes and
// one member each.
//
// A job without clip parameters reads these GOP samples as it reads any
// dataset's samples; clip samples (package clips) are what a video job
// wants.
//
// # Labels
//
// A video's label (Video.Label) is the number in a .cls file beside it
// ("x.cls" beside "x.mp4", as images are labelled in a packed dataset);
// when no video has one and every video is in a folder of at least two,
// the index of its folder's name among the folders' sorted names (the
// class-folder convention of torchvision's ImageFolder and Kinetics; the
// names are Dataset.Classes); else none (-1). A .json file beside a video
// is kept as it is (Video.JSON). Label files are read whole at index time
// (a .cls at most 64 bytes, a .json 1 MiB).
//
// # LeRobot
//
// A LeRobot v3 dataset (huggingface/lerobot, src/lerobot/datasets:
// utils.py's paths, dataset_metadata.py and dataset_writer.py's columns,
// dataset_reader.py's reads; docs/format.md §6.8 says what was read) is
// indexed as it is:
//
//   - meta/info.json: codebase_version (v3.x; v2.1 is refused, naming the
//     conversion script), fps, the features (those of dtype "video" are
//     the cameras, sorted), data_path and video_path;
//   - meta/episodes/chunk-*/file-*.parquet, read with arrow-go: each
//     episode's episode_index, dataset_from_index and dataset_to_index (its
//     rows), data/chunk_index and data/file_index (its data file), and per
//     camera videos/{camera}/chunk_index, file_index, from_timestamp and
//     to_timestamp (its span of that camera's file);
//   - data/chunk-*/file-*.parquet: their footers by format/parquet, whose
//     chunks (row groups) are the layout's first chunks, decoded by it; and
//     their index, episode_index and timestamp columns, read once with
//     arrow-go (the one data read, a few bytes a row), which must number
//     the rows in file order and agree with the episodes' table;
//   - each camera file an episode names, indexed by package mp4.
//
// Every row's frame is checked at index time: for each episode, camera and
// row, a frame of the camera's file must be shown within LeRobot's
// tolerance (1e-4 s) of the episode's start plus the row's timestamp, as
// LeRobot's decode_video_frames requires; a dataset out of sync is
// refused, naming the first row, where LeRobot would fail a sample
// mid-epoch. The episode's start is its from_timestamp moved to the
// nearest frame when that frame is less than half a frame from it: files
// joined with FFmpeg 5.1's concat demuxer start each episode after the
// first a fraction of a millisecond late at 30 fps (adding up along the
// file), which the episodes' table does not record. The fields are the data files' columns (format/parquet's
// members) and a field per camera (its chunks' GOPs): a job's columns=
// may read the cameras alone.
//
// # Bounds
//
// Each video's metadata is bounded by package mp4's limits (a moov at
// most format.Limits.MetaBytes, 2^22 samples, a picture of at most 8192 ×
// 8192 and 8192 × 4320 pixels: a 16k × 16k stream is refused from its
// sample entry); a chunk's resident bound by format.MaxChunkBytes; info.json
// 16 MiB; a LeRobot dataset 2^28 rows and 2^24 episodes.
//
// # What is refused
//
// At index time, naming the object (format.ErrInvalid unless said): no
// video files; only video files in containers package mp4 does not read
// (WebM, Matroska, …: ErrUnsupported naming them and the remux that
// makes them MP4s; beside MP4s they are left out, named in
// format.Layout.Skipped, which the manifest lists); any video package
// mp4 refuses (not an MP4, truncated, a damaged moov, no video track, an
// unsupported codec, past a limit: its error, wrapped; with
// format.Options.SkipBad the video is left out instead, named with the
// error in format.Layout.Skipped); a label file that is not a number or
// not JSON. In a LeRobot dataset: no info.json, an older layout
// (ErrUnsupported), a missing data or video file, episodes whose rows do not follow one
// another or disagree with the rows' episode_index, data files whose
// index column is not the rows in file order (ErrUnsupported), rows out
// of sync with their videos.
//
// # Costs
//
// Indexing reads per video its top-level box headers and its moov (and
// moofs): a few reads and a few KB a file (Stats, BenchmarkIndex;
// docs/format.md §6.8). The description (format.Layout.Meta) holds every
// sample as about 6 bytes (meta.go), each LeRobot row's timestamp in 4,
// and format/parquet's description of the rows; Open derives the frames
// and GOPs again from the samples.
//
// # Concurrency
//
// Format, LeRobotFormat and the decoders Open returns are safe for
// concurrent use; a Dataset is immutable once made.
package video
