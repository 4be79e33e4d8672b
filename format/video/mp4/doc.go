// Package mp4 indexes the video track of an ISO-BMFF file — MP4, MOV,
// fragmented MP4 — from its metadata alone, read by range reads: every
// sample's bytes, decode and presentation timestamps and sync flag, the
// frames in presentation order, and the GOPs (a sync sample and the
// samples up to the next) with the byte ranges they cover. It is the
// keyframe-group index of format/video: a clip's read is the GOPs holding
// its frames, known before a byte of media is fetched.
//
// Standard library only; it parses what Brand needs and nothing else.
//
// # What is read
//
// Index walks the file's top-level box headers with small range reads
// (8 bytes each; 16 for a box with a 64-bit size), skipping every mdat,
// and reads the moov box whole wherever it is (first, after
// `-movflags +faststart`, or last, as ffmpeg writes by default), then,
// when the moov announces fragments (mvex), every moof box whole. A
// metadata box is read together with the header after it, so a file with
// its moov last costs five reads (ftyp, free, mdat headers, moov), one
// with its moov first three, and a fragmented file two a fragment. No
// read reaches into an mdat's payload (TestReadsMetadataOnly, and
// TestFFprobe on every fixture); File.Reads and File.BytesRead say what
// it cost. A file whose moov is first is not walked past it.
//
// # Which track, which samples
//
// The video track is the first trak whose handler is "vide": the stream
// FFmpeg numbers first, which PyAV's container.streams.video[0] and
// LeRobot's decoders read. Its samples are what FFmpeg 5.1's mov demuxer
// (Debian 12's, the reference of the tests) gives as packets, in its
// order, with its timestamps and flags:
//
//   - sample sizes from stsz or stz2 (4-, 8- or 16-bit fields), chunk
//     offsets from stco or co64, samples per chunk from stsc; decode times
//     from stts; composition offsets from ctts, read signed whatever the
//     box's version, the decode timeline shifted earlier by the most
//     negative one (FFmpeg's dts_shift, which skips the last two entries);
//   - sync samples from stss (matched in order, as FFmpeg does), and stps;
//     no stss means every sample is a sync sample, an empty one only the
//     first;
//   - fragments: tfhd (base data offset, the moof as base, or where the
//     previous trun's data ended), trex and tfhd defaults, tfdt (else the
//     sidx time of the moof, else the end of the previous fragment), trun
//     (durations, sizes, flags, signed composition offsets); a fragment's
//     sample is a sync sample unless its flags say non-sync or
//     depends-on-others, and one that does not come after the sample
//     before it is discarded, as FFmpeg discards overlapping fragments.
//
// A sample's PTS is its DTS plus the shift plus its composition offset
// (its DTS where ctts does not reach it). TestFFprobe holds every sample
// — PTS, DTS, size, position, key and discard flags, the SHA-256 of its
// bytes — and every decoded frame to ffprobe's output on H.264 with and
// without B-frames, an open GOP, a keyframe every second and every ten,
// variable frame rate, moov first and last, fragmented with and without
// sidx, audio interleaved, a cut with an edit list, QuickTime, H.265
// (hvc1, hev1), VP9 and AV1, and rotated tracks.
//
// # Edit lists
//
// FFmpeg applies an edit list (mov_fix_index) and so PyAV's frames
// follow it; so does Index, for the edit lists writers make: at most one
// empty edit (a delay) and then one edit of media. As FFmpeg does, it
// keeps the samples from the sync sample before the edit's start (found
// in decode order, then moved back until one is presented no later)
// through the sync sample after its end (one more when there are
// composition offsets, for the B-frames after it) and drops the rest;
// marks Discard the samples presented outside the edit (decoded, as later
// samples may refer to them, but never output — a decoder drops their
// frames); retimes the kept samples onto the edit's timeline, the
// discarded ones before it counting back from the first shown; and moves
// the timeline so that the first frame shown is at 0 (or at the empty
// edit's end). That is what ffmpeg's own files need (an edit starting at
// the first frame's composition time, for B-frames) and what a cut with
// `ffmpeg -ss … -c copy` makes (an edit starting inside a GOP). A
// fragmented file's edit only shifts its times (FFmpeg's time_offset).
// More than one edit of media — FFmpeg then repeats or skips samples, so
// a sample no longer has one time — is refused as ErrUnsupported; an
// edit's media_rate is ignored, as FFmpeg ignores it.
//
// # Frames and GOPs
//
// Track.Frames are the samples not discarded, in presentation order (PTS,
// then decode order): the frames a decoder outputs, in the order it
// outputs them. Track.GOPs group the samples from each sync sample to the
// next in decode order (the first GOP starts at sample 0 whatever it is);
// a GOP's Ranges are its samples' bytes merged where adjacent (the audio
// of an interleaved file lies between them). To decode a frame, a decoder
// starts at its GOP's sync sample — B-frames included, as they follow in
// decode order — unless the GOP is Leading (some frame of it is shown
// before its sync sample: an open GOP), when that frame needs the GOP
// before.
//
// # Rotation
//
// The tkhd matrix is kept (Track.Matrix), and Track.Rotation says the
// display rotation it states, clockwise: what ffprobe shows as the
// display matrix's rotation, negated. Frames are indexed and served as
// coded; a caller that wants them upright rotates them.
//
// # Bounds
//
// Limits bound what hostile metadata costs, each checked before anything
// is allocated for what it bounds: the moov and the moofs together read
// (MetaBytes, 256 MiB), the samples (Samples, 2^22: a table count past it
// is refused before a table is read), the picture a sample entry states
// (Frames: package framesize's bound, 16,384 a side and 8192 × 4352
// pixels, the one the decoder applies too; a 16k × 16k stream is
// refused from its sample entry, TestRefusedBeforeAllocating), the
// top-level boxes walked (Boxes), a codec configuration box (1 MiB). Every
// table's count is checked against the bytes of its box, every box
// against its parent and the file, every sample against the end of the
// file. The picture the bitstream states is the decoder's to check.
//
// # What is refused
//
// ErrInvalid: not an MP4 or QuickTime file; no moov (or one cut off by the
// end of the file); a box running past its parent or the file (a
// truncated file); tables that disagree (chunks holding other samples than
// stsz counts, stts timing other samples, an entry of no samples);
// samples past the end of the file; a picture of no pixels; an avc1 or
// hvc1 entry without its parameter sets; an edit list showing nothing.
// ErrNoVideo: no video track, naming the tracks there are. ErrLimit: past
// a limit, naming it. ErrUnsupported: a codec other than H.264 (avc1,
// avc3), H.265 (hvc1, hev1), VP9 (vp09) and AV1 (av01), named (an mp4v
// entry by its esds's object type: MPEG-4 part 2, MPEG-1 or MPEG-2
// video, Motion JPEG, PNG, as FFmpeg writes them all so); encrypted
// samples; samples of a second sample description; media data in another
// file; several edits of media. Each wraps format.ErrInvalid or
// format.ErrUnsupported. FuzzIndex holds Index to never panicking and to
// consistent results on anything.
//
// # Concurrency
//
// Index keeps no state between calls; a File is not modified after it is
// returned and may be read concurrently.
package mp4
