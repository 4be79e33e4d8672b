// Package video decodes video on the data node: runs of a stream's
// compressed packets, as a container index gives them, into RGB frames
// equal byte for byte to PyAV's decode of the same frames, and clips of
// those frames into uint8 tensors with the transform package's seeded,
// Pillow-exact crops, resizes and flips.
//
// # Why
//
// A loader that decodes video per DataLoader worker fetches a file (or a
// range its own index finds), decodes from the keyframe before the clip,
// converts, crops and throws the rest away, once per clip: clips of one
// window that share a keyframe group decode it once each. Brand knows
// every clip of a window before decoding (the order is a pure function),
// so the data node decodes each group once for all of them and sends the
// trainer uint8 tensors. This package is that work, with no knowledge of
// HTTP, containers, caches or batches: the MP4 index (format/video/mp4)
// says where the packets are, the gateway's transform stage reads them,
// asks Cover which runs to decode, reserves memory and writes the clips.
//
// # Runs and exactness
//
// A Run is a stream's packets in decode order from a keyframe; Decode
// sends them in that order, drains the decoder at the run's end and hands
// out the wanted frames (by PTS) in presentation order, each converted
// once whatever number of clips want it. A frame is handed out only if
// it is what a decode of the whole stream from its first packet gives:
// every frame of a run but the leading pictures of its first keyframe
// (frames after it in decode order and before it in presentation order:
// an open GOP's, which reference the group before). Cover plans runs
// that start a group earlier for those, and refuses frames before a
// stream's first keyframe. Frames are matched to packets by PTS, never
// by their order, so B-frame reordering, variable frame rates and hidden
// frames (VP9's alt-refs in superframes) need nothing more. A disposable
// packet (an H.264 or H.265 picture no later one references) whose frame
// is not wanted is not sent at all (disposable.go): no other frame
// changes.
//
// # Pixels
//
// Decoding is libavcodec's (the decoder avcodec_find_decoder chooses, as
// PyAV's: h264, hevc, vp9, libdav1d for AV1), one thread per context;
// conversion to RGB is PyAV 10's frame.to_ndarray(format="rgb24")
// exactly: libswscale to the same size with SWS_BILINEAR and its
// default colourspace details (BT.601 coefficients; the range from the
// pixel format: yuvj formats full, all others limited, whatever the
// stream's tags say), into an image allocated as PyAV allocates it.
// Rotation (Stream.Rotation, the display matrix) is reported and not
// applied, as PyAV does not apply it. docs/transform.md §12 says which
// PyAV and FFmpeg the pixels are held to and how.
//
// # Clips
//
// Clips writes each clip's frames into a .npy uint8 tensor of (T, H, W,
// 3) (or (T, 3, H, W), (3, T, H, W)). A clip's crop box, size and flip
// are drawn once from its key (transform.Pipeline.Geometry: the draws
// an image of the frames' size would get) and applied to every frame
// with the transform package's resampler, bit for bit Pillow's.
//
// # Memory
//
// A decode holds at most Footprint bytes, known from the stream's index
// entry before any packet is decoded: every frame its decoder holds (for
// H.264 the reference and reorder frames its SPS states and three in
// passing, the decoder held to that count by the frame allocator it is
// given; for the others the codec's reference and reordering slots), in
// the pixel layout the configuration record states, the decoder's
// tables and the RGB conversion: 637 MB for an 8K H.264 whose decode
// peaks at 358 MB (docs/transform.md §12.5). A Decoder reserves it from
// Options.Budget (the node's memory for decodes) before it opens or
// reuses a context, and a pooled context keeps its reservation while
// idle (libavcodec keeps its frame pool); idle contexts are closed to
// make room. A stream past the bound on frames (package framesize's,
// the one the index applies: 16,384 a side, 8192 × 4352 pixels) is
// refused from its index entry, and libavcodec is given the pixel bound
// too, so a bitstream claiming more than its index is refused before
// the decoder allocates a frame.
// Clips.Sizes and Clips.Work say what the outputs and the transforms
// take, for the caller to reserve.
//
// # Failures
//
// ErrNoDecoder: a build without -tags brand_libav. ErrCodec: a codec
// other than H.264, H.265, VP9 and AV1. ErrTooLarge: over the bounds.
// ErrRun: a run that cannot give a wanted frame exactly. ErrDecode: the
// packets do not decode, or decode to frames other than the index says
// (another size, a frame missing or twice, a frame the decoder flags as
// damaged), with libavcodec's own words; no frame of a failed run is to
// be used. A packet damaged so that it still parses decodes to other
// pixels without any decoder noticing; the store's and the reader's
// checks (the index's sample sizes, the object's version) are what
// catch those.
//
// # Concurrency
//
// A Decoder is safe for concurrent use: each Decode takes a context of
// its own from the pool. A Clips is used by one goroutine at a time.
// libavcodec's log is routed to the contexts' errors (its callback is
// the process's; Brand uses libav for nothing else).
package video
