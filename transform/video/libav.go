//go:build cgo && brand_libav

package video

/*
#cgo pkg-config: libavcodec libavutil libswscale
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <libavcodec/avcodec.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

// brand_dec is one decoder context and what converts its frames to RGB:
// a libswscale context and an RGB image allocated exactly as PyAV 10's
// VideoFrame._init allocates the frame it converts into (av_image_alloc,
// alignment 16), so that sws_scale takes the same code path as there.
typedef struct {
	AVCodecContext *ctx;
	AVPacket *pkt;
	AVFrame *frame;
	struct SwsContext *sws;
	uint8_t *rgb[4];
	int rgb_ls[4];
	int rgb_w, rgb_h;
	char said[256]; // the decoder's first error message since the last packet
	// The frames the decoder holds now and at most (its buffers from
	// get_buffer2 not yet freed), and the most it may: brand_get_buffer
	// refuses one more, so that a stream holding more frames than its
	// configuration states (and Footprint reserved) fails its decode.
	// A context is used by one thread at a time (thread_count 1), and
	// libavcodec frees a frame's buffer on the thread that unrefs it.
	int frames, frames_peak, frames_max;
} brand_dec;

// brand_held is one frame buffer the decoder was given: the buffer
// libavcodec's default allocator made, wrapped so that its release is
// counted.
typedef struct {
	brand_dec *d;
	AVBufferRef *inner;
} brand_held;

static void brand_held_free(void *opaque, uint8_t *data) {
	brand_held *h = opaque;
	h->d->frames--;
	av_buffer_unref(&h->inner);
	av_free(h);
}

// brand_get_buffer is the decoder's get_buffer2: libavcodec's own
// allocator (its frame pool), counted against frames_max.
static int brand_get_buffer(AVCodecContext *ctx, AVFrame *f, int flags) {
	brand_dec *d = ctx->opaque;
	if (d->frames_max > 0 && d->frames >= d->frames_max) {
		if (!d->said[0]) {
			snprintf(d->said, sizeof d->said, "the decoder needs more than the %d frames at once the stream's parameter sets state", d->frames_max);
		}
		return AVERROR(ENOMEM);
	}
	int r = avcodec_default_get_buffer2(ctx, f, flags);
	if (r < 0) return r;
	brand_held *h = av_malloc(sizeof *h);
	AVBufferRef *outer = h ? av_buffer_create(f->buf[0]->data, f->buf[0]->size, brand_held_free, h, 0) : NULL;
	if (outer == NULL) {
		av_free(h);
		av_frame_unref(f);
		return AVERROR(ENOMEM);
	}
	h->d = d;
	h->inner = f->buf[0];
	f->buf[0] = outer;
	if (++d->frames > d->frames_peak) d->frames_peak = d->frames;
	return 0;
}

typedef struct {
	int64_t pts;
	int width, height, format;
	int corrupt;   // AV_FRAME_FLAG_CORRUPT
	int errors;    // decode_error_flags
} brand_frame;

// brand_log keeps a decoder's error messages with its context (where the
// caller's error reports them) and drops everything else: libavcodec
// would otherwise write to the process's stderr. libav's log callback is
// the process's; Brand uses libav for nothing else.
static void brand_log(void *avcl, int level, const char *fmt, va_list vl) {
	if (level > AV_LOG_ERROR || avcl == NULL) return;
	if (*(const AVClass **)avcl != avcodec_get_class()) return;
	brand_dec *d = ((AVCodecContext *)avcl)->opaque;
	if (d == NULL || d->said[0]) return; // the first error is the cause
	vsnprintf(d->said, sizeof d->said, fmt, vl);
	size_t n = strlen(d->said);
	while (n > 0 && (d->said[n-1] == '\n' || d->said[n-1] == ' ')) d->said[--n] = 0;
}

static pthread_once_t brand_log_once = PTHREAD_ONCE_INIT;

static void brand_log_init(void) { av_log_set_callback(brand_log); }

static void brand_err(brand_dec *d, int e, char *msg, size_t n) {
	char s[AV_ERROR_MAX_STRING_SIZE];
	av_strerror(e, s, sizeof s);
	if (d != NULL && d->said[0]) {
		snprintf(msg, n, "%s (%s)", s, d->said);
	} else {
		snprintf(msg, n, "%s", s);
	}
}

// brand_said copies the decoder's first error message into msg.
static void brand_said(brand_dec *d, char *msg, size_t n) {
	snprintf(msg, n, "%s", d->said);
}

static void brand_close(brand_dec *d) {
	if (d == NULL) return;
	// The frame first: its buffer's release counts in d.
	av_frame_free(&d->frame);
	avcodec_free_context(&d->ctx);
	av_packet_free(&d->pkt);
	sws_freeContext(d->sws);
	av_freep(&d->rgb[0]);
	av_free(d);
}

// brand_open opens the decoder libavcodec chooses for codec id (the one
// PyAV's avcodec_find_decoder chooses too), with the stream's extradata,
// one thread, the pixel bound, and the reorder depth the stream's
// timestamps show (has_b_frames; libavformat gives PyAV's decoder the same
// through video_delay). 0, or a negative AVERROR with msg set.
static int brand_open(brand_dec **out, int id, int w, int h, const uint8_t *extra, int extra_n,
		int64_t max_pixels, int reorder, int frames_max, char *msg, size_t msg_n) {
	const AVCodec *codec = avcodec_find_decoder((enum AVCodecID)id);
	if (codec == NULL) {
		snprintf(msg, msg_n, "this libavcodec has no decoder for codec id %d", id);
		return AVERROR_DECODER_NOT_FOUND;
	}
	brand_dec *d = av_mallocz(sizeof(brand_dec));
	if (d == NULL) return AVERROR(ENOMEM);
	pthread_once(&brand_log_once, brand_log_init);
	d->ctx = avcodec_alloc_context3(codec);
	d->pkt = av_packet_alloc();
	d->frame = av_frame_alloc();
	if (d->ctx == NULL || d->pkt == NULL || d->frame == NULL) {
		brand_close(d);
		return AVERROR(ENOMEM);
	}
	d->ctx->opaque = d;
	d->ctx->width = w;
	d->ctx->height = h;
	d->ctx->max_pixels = max_pixels;
	d->ctx->has_b_frames = reorder;
	d->ctx->thread_count = 1;
	d->frames_max = frames_max;
	d->ctx->get_buffer2 = brand_get_buffer;
	// H.264 drops, when draining, frames decoded before an open GOP's
	// recovery point was output, though they are whole (a run that
	// starts at such a keyframe and ends a few frames later loses its
	// last frames); a decode of the whole stream never meets that. Show
	// them all: which frames a run gives exactly is decided by their
	// timestamps (runFrames), not by the decoder's heuristic.
	if (id == AV_CODEC_ID_H264) d->ctx->flags2 |= AV_CODEC_FLAG2_SHOW_ALL;
	if (extra_n > 0) {
		d->ctx->extradata = av_mallocz(extra_n + AV_INPUT_BUFFER_PADDING_SIZE);
		if (d->ctx->extradata == NULL) {
			brand_close(d);
			return AVERROR(ENOMEM);
		}
		memcpy(d->ctx->extradata, extra, extra_n);
		d->ctx->extradata_size = extra_n;
	}
	int r = avcodec_open2(d->ctx, codec, NULL);
	if (r < 0) {
		brand_err(d, r, msg, msg_n);
		brand_close(d);
		return r;
	}
	*out = d;
	return 0;
}

// brand_send sends one packet (copied, with libavcodec's padding), or,
// with data NULL, the end of the stream.
static int brand_send(brand_dec *d, const uint8_t *data, int n, int64_t pts, int64_t dts, int key,
		char *msg, size_t msg_n) {
	int r;
	d->said[0] = 0;
	if (data == NULL) {
		r = avcodec_send_packet(d->ctx, NULL);
	} else {
		r = av_new_packet(d->pkt, n);
		if (r < 0) return r;
		memcpy(d->pkt->data, data, n);
		d->pkt->pts = pts;
		d->pkt->dts = dts;
		if (key) d->pkt->flags |= AV_PKT_FLAG_KEY;
		r = avcodec_send_packet(d->ctx, d->pkt);
		av_packet_unref(d->pkt);
	}
	if (r < 0) brand_err(d, r, msg, msg_n);
	return r;
}

// brand_receive takes the next decoded frame: 1 with f filled, 0 when the
// decoder wants more input, 2 at the end of the stream, or a negative
// AVERROR with msg set. The frame stays in d until the next call.
static int brand_receive(brand_dec *d, brand_frame *f, char *msg, size_t msg_n) {
	av_frame_unref(d->frame);
	int r = avcodec_receive_frame(d->ctx, d->frame);
	if (r == AVERROR(EAGAIN)) return 0;
	if (r == AVERROR_EOF) return 2;
	if (r < 0) {
		brand_err(d, r, msg, msg_n);
		return r;
	}
	f->pts = d->frame->pts;
	f->width = d->frame->width;
	f->height = d->frame->height;
	f->format = d->frame->format;
	f->corrupt = (d->frame->flags & AV_FRAME_FLAG_CORRUPT) != 0;
	f->errors = d->frame->decode_error_flags;
	return 1;
}

// brand_rgb converts the frame brand_receive returned to packed RGB into
// dst (width*3 bytes a row) exactly as PyAV 10's
// frame.to_ndarray(format="rgb24") does: sws_getCachedContext to the same
// size in AV_PIX_FMT_RGB24 with SWS_BILINEAR and no filters, the
// colourspace details left at libswscale's defaults (PyAV sets them only
// when asked for another colourspace), sws_scale into an image of
// av_image_alloc's layout, then the rows without their padding.
static int brand_rgb(brand_dec *d, uint8_t *dst, char *msg, size_t msg_n) {
	AVFrame *f = d->frame;
	int w = f->width, h = f->height;
	d->sws = sws_getCachedContext(d->sws, w, h, (enum AVPixelFormat)f->format,
		w, h, AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL, NULL, NULL);
	if (d->sws == NULL) {
		snprintf(msg, msg_n, "libswscale cannot convert %s to rgb24", av_get_pix_fmt_name((enum AVPixelFormat)f->format));
		return AVERROR(EINVAL);
	}
	if (d->rgb[0] == NULL || d->rgb_w != w || d->rgb_h != h) {
		av_freep(&d->rgb[0]);
		int r = av_image_alloc(d->rgb, d->rgb_ls, w, h, AV_PIX_FMT_RGB24, 16);
		if (r < 0) {
			brand_err(NULL, r, msg, msg_n);
			return r;
		}
		d->rgb_w = w;
		d->rgb_h = h;
	}
	sws_scale(d->sws, (const uint8_t * const *)f->data, f->linesize, 0, h, d->rgb, d->rgb_ls);
	for (int y = 0; y < h; y++) {
		memcpy(dst + (size_t)y * w * 3, d->rgb[0] + (size_t)y * d->rgb_ls[0], (size_t)w * 3);
	}
	return 0;
}

// brand_reset returns the decoder to its state after opening, as a seek
// does: what a context reused for another run needs.
static void brand_reset(brand_dec *d) {
	av_frame_unref(d->frame);
	avcodec_flush_buffers(d->ctx);
}

static int brand_frames_peak(brand_dec *d) { return d->frames_peak; }

static int brand_pix_bytes(int format, int w, int h) {
	return av_image_get_buffer_size((enum AVPixelFormat)format, w, h, 1);
}

static const char *brand_pix_name(int format) {
	const char *n = av_get_pix_fmt_name((enum AVPixelFormat)format);
	return n ? n : "unknown";
}

// brand_heap is the C heap in use (glibc's count): what the tests measure
// a decode's memory and the pool's leaks with.
static size_t brand_heap(void) {
	struct mallinfo2 m = mallinfo2();
	return m.uordblks + m.hblkhd;
}

static int brand_codec_id(int which) {
	switch (which) {
	case 1: return AV_CODEC_ID_H264;
	case 2: return AV_CODEC_ID_HEVC;
	case 3: return AV_CODEC_ID_VP9;
	case 4: return AV_CODEC_ID_AV1;
	}
	return AV_CODEC_ID_NONE;
}

static const char *brand_decoder_name(int which) {
	const AVCodec *c = avcodec_find_decoder((enum AVCodecID)brand_codec_id(which));
	return c ? c->name : "";
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// libavVersion is the libraries this binary was built with, for people.
func libavVersion() string {
	v := func(n C.uint) string { return fmt.Sprintf("%d.%d.%d", n>>16, n>>8&0xff, n&0xff) }
	return "libavcodec " + v(C.avcodec_version()) + ", libswscale " + v(C.swscale_version())
}

// available reports that this build decodes video.
const available = true

// decoderName is the libavcodec decoder that codec c opens (as
// avcodec_find_decoder chooses it: "h264", "hevc", "vp9", "libdav1d"), or
// "" if this libavcodec has none.
func decoderName(c codec) string { return C.GoString(C.brand_decoder_name(C.int(c))) }

// cHeap is the C heap in use, bytes (glibc's mallinfo2).
func cHeap() int64 { return int64(C.brand_heap()) }

// libav is one open libavcodec decoder. It is used by one goroutine at a
// time.
type libav struct {
	d   *C.brand_dec
	msg [256]C.char
}

func (l *libav) err() string { return C.GoString(&l.msg[0]) }

// openCodec opens a decoder for s, with the reorder depth its run's
// timestamps show.
func openCodec(s Stream, c codec, maxPixels int64, reorder int, maxFrames int64) (codecContext, error) {
	l := &libav{}
	var extra *C.uint8_t
	x := s.Extradata
	if c == codecVP9 {
		// libavformat gives a VP9 decoder no extradata (a vpcC box
		// describes the stream, the decoder reads its frames' headers);
		// PyAV's decoder gets none, so neither does this one.
		x = nil
	}
	if len(x) > 0 {
		extra = (*C.uint8_t)(unsafe.Pointer(&x[0]))
	}
	r := C.brand_open(&l.d, C.brand_codec_id(C.int(c)), C.int(s.Width), C.int(s.Height), extra, C.int(len(x)),
		C.int64_t(maxPixels), C.int(reorder), C.int(maxFrames), &l.msg[0], C.size_t(len(l.msg)))
	if r < 0 {
		return nil, fmt.Errorf("%w: opening libavcodec's %s decoder: %s", ErrDecode, c, l.err())
	}
	return l, nil
}

func (l *libav) send(p *Packet) error {
	var r C.int
	if p == nil {
		r = C.brand_send(l.d, nil, 0, 0, 0, 0, &l.msg[0], C.size_t(len(l.msg)))
	} else {
		if len(p.Data) == 0 {
			return fmt.Errorf("%w: an empty packet", ErrDecode)
		}
		key := C.int(0)
		if p.Key {
			key = 1
		}
		r = C.brand_send(l.d, (*C.uint8_t)(unsafe.Pointer(&p.Data[0])), C.int(len(p.Data)), C.int64_t(p.PTS), C.int64_t(p.DTS), key,
			&l.msg[0], C.size_t(len(l.msg)))
	}
	if r < 0 {
		return fmt.Errorf("%w: %s", ErrDecode, l.err())
	}
	return nil
}

func (l *libav) receive() (decoded, int, error) {
	var f C.brand_frame
	r := C.brand_receive(l.d, &f, &l.msg[0], C.size_t(len(l.msg)))
	switch {
	case r < 0:
		return decoded{}, 0, fmt.Errorf("%w: %s", ErrDecode, l.err())
	case r == 0:
		return decoded{}, recvAgain, nil
	case r == 2:
		return decoded{}, recvEnd, nil
	}
	var said string
	if f.corrupt != 0 || f.errors != 0 {
		C.brand_said(l.d, &l.msg[0], C.size_t(len(l.msg)))
		said = l.err()
	}
	return decoded{
		said: said,
		pts:  int64(f.pts), width: int(f.width), height: int(f.height),
		format: C.GoString(C.brand_pix_name(f.format)), bytes: int64(C.brand_pix_bytes(f.format, f.width, f.height)),
		corrupt: f.corrupt != 0, errors: int(f.errors),
	}, recvFrame, nil
}

func (l *libav) rgb(dst []byte) error {
	if r := C.brand_rgb(l.d, (*C.uint8_t)(unsafe.Pointer(&dst[0])), &l.msg[0], C.size_t(len(l.msg))); r < 0 {
		return fmt.Errorf("%w: %s", ErrDecode, l.err())
	}
	return nil
}

func (l *libav) reset() { C.brand_reset(l.d) }

// framesPeak is the most frame buffers the decoder has held at once.
func (l *libav) framesPeak() int { return int(C.brand_frames_peak(l.d)) }

func (l *libav) close() {
	C.brand_close(l.d)
	l.d = nil
}
