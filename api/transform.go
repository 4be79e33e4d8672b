package api

// TransformStats is the transform stage's part of /stats: the decoder
// this build uses, the node's workers and what waits for them, and per
// pipeline what it cost (docs/transform.md §10).
type TransformStats struct {
	// Decoder is the JPEG decoder: "go" (image/jpeg) or "turbojpeg"
	// (libjpeg-turbo, a build with -tags brand_turbojpeg).
	Decoder string `json:"decoder"`
	Workers int    `json:"workers"`
	// Queued is the samples waiting for a worker or being transformed,
	// Running those being transformed.
	Queued  int64 `json:"queued"`
	Running int64 `json:"running"`
	// Ahead is the batches transformed ahead of their requests.
	Ahead     TransformAheadStats     `json:"ahead"`
	Pipelines []TransformPipelineStat `json:"pipelines"`
}

// TransformPipelineStat is one pipeline's figures on one node, since it
// started.
type TransformPipelineStat struct {
	Name string `json:"name"`
	// Fingerprint names the pipeline's definition on this node: a
	// batch's ETag names it, and peers transform for each other only
	// with equal fingerprints.
	Fingerprint string `json:"fingerprint"`
	Images      uint64 `json:"images"`
	// Failed counts images that could not be transformed: undecodable,
	// truncated or over the pixel bound.
	Failed     uint64  `json:"failed"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPerImageMs is the thread CPU per image, failures' included.
	CPUPerImageMs float64 `json:"cpu_per_image_ms"`
	// ImagesPerCoreSecond is what one core transforms a second at that
	// cost; ImagesPerSecond what this node transformed a second over the
	// last 10 seconds.
	ImagesPerCoreSecond float64 `json:"images_per_core_second"`
	ImagesPerSecond     float64 `json:"images_per_second"`
}

// TransformAheadStats counts the batches a node transformed ahead of
// their requests: started, found by their request (hits), dropped
// unused, and the bytes held now.
type TransformAheadStats struct {
	Started  int64 `json:"started"`
	Hits     int64 `json:"hits"`
	Dropped  int64 `json:"dropped"`
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"max_bytes"`
}

// VideoStats are a node's clip jobs' figures in /stats, since it started:
// the clips it decoded and served and their frames; the GOPs their
// batches read (each once a batch, whichever clips of it need it) and
// their bytes, and those bytes a clip; the GOPs decoded and the frames of
// the runs that decoded them (every packet from a run's keyframe to its
// last wanted frame: what GET /plan predicts), and those a clip; of them
// the frames left undecoded (disposable and wanted by no clip); the runs,
// the CPU of decoding, converting and resampling, and that a clip; the
// decoded-GOP cache; and the pool of decoder contexts.
type VideoStats struct {
	Decoder         string  `json:"decoder"`
	Clips           int64   `json:"clips"`
	Frames          int64   `json:"frames"`
	GOPsRead        int64   `json:"gops_read"`
	GOPBytesRead    int64   `json:"gop_bytes_read"`
	GOPBytesPerClip float64 `json:"gop_bytes_per_clip"`
	GOPsDecoded     int64   `json:"gops_decoded"`
	FramesDecoded   int64   `json:"frames_decoded"`
	// FramesDecodedPerClip is FramesDecoded over Clips; FramesLeftOut
	// the frames of those runs not sent to the decoder (disposable,
	// wanted by no clip: docs/transform.md §12.2).
	FramesDecodedPerClip float64 `json:"frames_decoded_per_clip"`
	FramesLeftOut        int64   `json:"frames_left_out"`
	Runs                 int64   `json:"runs"`
	DecodeCPUSeconds     float64 `json:"decode_cpu_seconds"`
	DecodeCPUPerClipMs   float64 `json:"decode_cpu_per_clip_ms"`
	Contexts             int64   `json:"decoder_contexts"`
	IdleContexts         int64   `json:"decoder_contexts_idle"`
	ContextsOpened       int64   `json:"decoder_contexts_opened"`
	ContextsReused       int64   `json:"decoder_contexts_reused"`
	// ClipsSkipped counts the clips left out of batches (gateway
	// --on-damaged-chunk=skip) because a GOP they need is of a file
	// damaged, vanished or undecodable: each named in its batch's
	// Brand-Missing-* headers.
	ClipsSkipped int64 `json:"clips_skipped"`
	// GOPCache is the decoded-GOP cache's figures.
	GOPCache *GOPCacheStats `json:"gop_cache,omitempty"`
}

// GOPCacheStats are a node's decoded-GOP cache's figures
// (docs/transform.md §12.9): its bound (--gop-cache-bytes), the bytes
// and GOPs it holds now and the most bytes it has held; the GOPs batches took from it and their frames;
// the GOPs decoded and kept for later batches of their horizon, and those
// decoded for their batch alone (of them, those held without a frame the
// batch wanted: an open GOP's leading frame the batch that decoded it
// could not decode, the GOP before it not read); those dropped for room
// before every sample that wanted them was served, and those dropped
// once it was.
type GOPCacheStats struct {
	Limit           int64 `json:"limit_bytes"`
	Held            int64 `json:"held_bytes"`
	PeakHeld        int64 `json:"peak_held_bytes"`
	GOPs            int   `json:"gops"`
	Hits            int64 `json:"hits"`
	FramesFromCache int64 `json:"frames_from_cache"`
	Kept            int64 `json:"kept"`
	Alone           int64 `json:"alone"`
	Short           int64 `json:"short"`
	Evicted         int64 `json:"evicted"`
	Dropped         int64 `json:"dropped"`
}
