// Package clips turns a video dataset (package video's description) into
// the samples of a clip job: which frames each sample holds, and which
// GOPs and chunks have to be read and decoded for them. A sample is a
// pure function of (the description — the dataset's version —, the
// parameters, seed, epoch, sample number): every replica, a restart and
// any world or cluster size compute the same clip, so a job resumes
// exactly. No I/O; nothing is decoded here.
//
// # A tree of videos: segments
//
// New(d, Params) cuts each video's frames (in presentation order, or
// resampled at Params.FPS by their timestamps: frame j is the last one
// shown at or before j/FPS s after the first, so variable frame rate is
// honoured) into segments of Step frames from its first, as many as
// can start a clip of Frames frames Stride apart (a span of
// (Frames−1)×Stride+1); a video shorter than a span has none. Each
// segment is a sample, numbered video by video. Its clip starts at a
// frame drawn uniformly within the segment (seeded.New(seed, epoch,
// "brandclp", sample)), anew each epoch, or at the segment's first frame
// with Fixed. So:
//
//   - Step = span (the default): every part of every video, once an
//     epoch, in non-overlapping clips — torchvision's VideoClips with
//     step_between_clips = the span, with a random offset;
//   - Step = 1 with Fixed: every clip position (VideoClips with step 1);
//   - Step ≥ a video's length: one random clip a video an epoch
//     (PyTorchVideo's random clip sampler).
//
// A clip's GOPs are those of its frames — decoding a frame starts at its
// GOP's sync sample and runs through the GOP in decode order, B-frames
// included — and, for a frame shown before its GOP's sync sample (an open
// GOP), the GOP before; GOPs between two a strided clip skips are not
// read. Its chunks are the layout chunks holding those GOPs.
//
// # A LeRobot dataset: anchors and windows
//
// NewLeRobot(d, windows, tol) makes a sample of each row (an anchor
// frame), numbered by global index, as LeRobotDataset does. A Window is
// one entry of delta_timestamps: for offset δ its row is the anchor's
// plus round(δ × fps) (δ must be whole frames, within tol, as LeRobot's
// check_delta_timestamps demands), clamped to the anchor's episode and
// marked Pad when clamped ({key}_is_pad); a camera's frame for that row
// is the one of the episode's span of the camera's file shown nearest to
// from_timestamp + the row's timestamp (the earlier of two as near),
// within tol (LeRobot's tolerance_s, 1e-4 s), as decode_video_frames
// picks it. A camera the job gives no window reads its frame at the
// anchor's time. A sample's chunks are its rows' and its frames' GOPs'.
//
// # Units
//
// Counts are the samples of each unit, in order, numbering the samples
// unit by unit: what shuffle.NewEpoch permutes into windows of units.
// A tree's unit is the layout chunk holding the GOP of a segment's first
// frame; a LeRobot dataset's is the episode (package video, "Chunks").
// A sample may need chunks beyond its unit's (a clip crossing into the
// next chunk; a LeRobot sample's rows and cameras): Clip names them all,
// and Reach and UnitChunks say, before any clip is drawn, every chunk a
// sample's or a unit's clips may need in any epoch — what a planner or a
// prefetch adds up over a window.
//
// # Stability
//
// The draws are part of the job's specification, as the shuffle's are:
// package seeded's stream with the domain "brandclp" and the sample
// number as its index, one Bounded draw a clip. testdata/golden.json pins
// every clip of several jobs over three (seed, epoch) pairs.
//
// # Costs
//
// New is O(videos + segments) in time and memory (a unit a segment);
// NewLeRobot O(episodes). Clip is O(Frames log frames) (O(windows ×
// offsets × log frames) for LeRobot); Reach O(chunks it names).
//
// # Concurrency
//
// A Space is immutable and safe for concurrent use.
package clips
