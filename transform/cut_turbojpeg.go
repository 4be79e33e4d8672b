//go:build cgo && brand_turbojpeg

package transform

/*
#cgo LDFLAGS: -ljpeg
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>

// brand_cut_dest is a destination growing one malloc'd buffer, which the
// context owns, so that an error at any point frees exactly it.
struct brand_cut_dest {
	struct jpeg_destination_mgr pub;
	unsigned char *buf;
	size_t cap;
};

// brand_cut_ctx is everything one cut holds, on the heap: after a
// longjmp it is read through a pointer set before the setjmp.
struct brand_cut_ctx {
	struct jpeg_error_mgr pub;
	jmp_buf jump;
	char msg[JMSG_LENGTH_MAX];
	int truncated;
	struct jpeg_decompress_struct s;
	struct jpeg_compress_struct d;
	int d_created;
	struct brand_cut_dest dest;
	struct jpeg_source_mgr src;
	struct jpeg_progress_mgr progress;
	// stop_rows, when positive, is the iMCU rows (as the decoder counts
	// them) after which a one-scan JPEG's entropy decoding stops.
	JDIMENSION stop_rows;
	int stopped;
};

static void brand_cut_error_exit(j_common_ptr c) {
	struct brand_cut_ctx *x = (struct brand_cut_ctx *)c->err;
	(*c->err->format_message)(c, x->msg);
	longjmp(x->jump, 1);
}

// As the decoder's: a source that runs out of data is an error (libjpeg
// would cut it with zero coefficients), other warnings are quiet.
static void brand_cut_emit_message(j_common_ptr c, int level) {
	struct brand_cut_ctx *x = (struct brand_cut_ctx *)c->err;
	if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
		x->truncated = 1;
		(*c->err->format_message)(c, x->msg);
	}
}

static const JOCTET brand_cut_eoi[2] = {0xFF, JPEG_EOI};

static void brand_cut_init_src(j_decompress_ptr c) { (void)c; }

// brand_cut_fill is asked for bytes past the end of the source: a
// truncated JPEG (warned, which makes it an error) unless the cut
// stopped reading on purpose. Either way it ends the data with an EOI.
static boolean brand_cut_fill(j_decompress_ptr c) {
	struct brand_cut_ctx *x = (struct brand_cut_ctx *)c->err;
	if (!x->stopped) {
		WARNMS(c, JWRN_JPEG_EOF);
	}
	c->src->next_input_byte = brand_cut_eoi;
	c->src->bytes_in_buffer = 2;
	return TRUE;
}

static void brand_cut_skip(j_decompress_ptr c, long n) {
	struct jpeg_source_mgr *s = c->src;
	if (n <= 0) {
		return;
	}
	while (n > (long)s->bytes_in_buffer) {
		n -= (long)s->bytes_in_buffer;
		(void)(*s->fill_input_buffer)(c);
	}
	s->next_input_byte += n;
	s->bytes_in_buffer -= n;
}

static void brand_cut_term_src(j_decompress_ptr c) { (void)c; }

// brand_cut_progress runs before each iMCU row jpeg_read_coefficients
// decodes: once the rows the cut reads are in, the source ends (an EOI
// where the scan's data goes on), so that libjpeg pads the rows below
// with nothing instead of decoding them.
static void brand_cut_progress(j_common_ptr common) {
	j_decompress_ptr c = (j_decompress_ptr)common;
	struct brand_cut_ctx *x = (struct brand_cut_ctx *)c->err;
	if (x->stop_rows > 0 && !x->stopped && c->input_iMCU_row >= x->stop_rows) {
		x->stopped = 1;
		c->src->bytes_in_buffer = 0;
	}
}

static void brand_cut_init_dest(j_compress_ptr c) { (void)c; }

static boolean brand_cut_empty(j_compress_ptr c) {
	struct brand_cut_dest *d = (struct brand_cut_dest *)c->dest;
	size_t n = d->cap * 2;
	unsigned char *b = realloc(d->buf, n);
	if (b == NULL) {
		ERREXIT1(c, JERR_OUT_OF_MEMORY, 10);
	}
	d->pub.next_output_byte = b + d->cap;
	d->pub.free_in_buffer = n - d->cap;
	d->buf = b;
	d->cap = n;
	return TRUE;
}

static void brand_cut_term_dest(j_compress_ptr c) { (void)c; }

// brand_cut writes into *out (malloc'd, *outn bytes; the caller frees it)
// the JPEG of the smallest iMCU-aligned region of src containing the box
// at (x, y) of w×h pixels, cut in the DCT domain: the blocks covering the
// region, their coefficients untouched, re-entropy-coded as a baseline
// JPEG with no markers but JFIF's. *ox, *oy are the box's offset in the
// cut image. It returns 0; 1 when src is a JPEG it will not cut (msg
// says why); -1 when src cannot be read (msg says why).
static int brand_cut(const unsigned char *src, unsigned long n, int x, int y, int w, int h,
		int optimize, unsigned char **out, unsigned long *outn, int *ox, int *oy, char *msg) {
	struct brand_cut_ctx *c = calloc(1, sizeof *c);
	if (c == NULL) {
		strcpy(msg, "out of memory");
		return -1;
	}
	c->s.err = jpeg_std_error(&c->pub);
	c->pub.error_exit = brand_cut_error_exit;
	c->pub.emit_message = brand_cut_emit_message;
	c->d.err = &c->pub;
	int ret = -1;
	if (setjmp(c->jump)) {
		strcpy(msg, c->msg);
		goto done;
	}
	jpeg_create_decompress(&c->s);
	c->src.init_source = brand_cut_init_src;
	c->src.fill_input_buffer = brand_cut_fill;
	c->src.skip_input_data = brand_cut_skip;
	c->src.resync_to_restart = jpeg_resync_to_restart;
	c->src.term_source = brand_cut_term_src;
	c->src.next_input_byte = src;
	c->src.bytes_in_buffer = n;
	c->s.src = &c->src;
	jpeg_read_header(&c->s, TRUE);
	struct jpeg_decompress_struct *s = &c->s;
	int gray = s->jpeg_color_space == JCS_GRAYSCALE && s->num_components == 1;
	if (s->data_precision != 8) {
		snprintf(msg, JMSG_LENGTH_MAX, "%d-bit samples", s->data_precision);
		ret = 1;
		goto done;
	}
	if (!gray && !(s->jpeg_color_space == JCS_YCbCr && s->num_components == 3)) {
		const char *cs = s->jpeg_color_space == JCS_CMYK ? "CMYK" : s->jpeg_color_space == JCS_YCCK ? "YCCK" :
			s->jpeg_color_space == JCS_RGB ? "RGB" : "an unusual colour space";
		snprintf(msg, JMSG_LENGTH_MAX, "%s with %d components; the GPU path takes YCbCr and grayscale", cs, s->num_components);
		ret = 1;
		goto done;
	}
	if (x < 0 || y < 0 || w < 1 || h < 1 || (JDIMENSION)(x + w) > s->image_width || (JDIMENSION)(y + h) > s->image_height) {
		snprintf(msg, JMSG_LENGTH_MAX, "box %dx%d+%d+%d outside the %ux%u image", w, h, x, y,
			(unsigned)s->image_width, (unsigned)s->image_height);
		goto done;
	}
	// The iMCU: 8·max sampling factor pixels each way. A single
	// component is coded block by block whatever factors it declares,
	// and is cut (and written) at 1×1.
	int mh = gray ? 1 : s->max_h_samp_factor, mv = gray ? 1 : s->max_v_samp_factor;
	int iw = 8 * mh, ih = 8 * mv;
	int x0 = x - x % iw, y0 = y - y % ih;
	JDIMENSION cw = x + w - x0, ch = y + h - y0;
	JDIMENSION wi = (cw + iw - 1) / iw, hi = (ch + ih - 1) / ih;
	// A JPEG of one scan holding every component is decoded down to the
	// last iMCU row the cut reads, no further; a progressive or
	// multi-scan one needs every scan.
	if (!s->progressive_mode && s->comps_in_scan == s->num_components) {
		c->stop_rows = (y + h + 8 * s->max_v_samp_factor - 1) / (8 * s->max_v_samp_factor);
		c->progress.progress_monitor = brand_cut_progress;
		s->progress = &c->progress;
	}
	jvirt_barray_ptr *scoef = jpeg_read_coefficients(s);
	if (c->truncated) {
		strcpy(msg, c->msg);
		goto done;
	}

	struct jpeg_compress_struct *d = &c->d;
	jpeg_create_compress(d);
	c->d_created = 1;
	jpeg_copy_critical_parameters(s, d);
	d->image_width = cw;
	d->image_height = ch;
	d->optimize_coding = optimize ? TRUE : FALSE;
	if (gray) {
		d->comp_info[0].h_samp_factor = 1;
		d->comp_info[0].v_samp_factor = 1;
	}
	// Not pre-zeroed: the copy below writes every block of every array.
	jvirt_barray_ptr dcoef[MAX_COMPONENTS];
	for (int k = 0; k < d->num_components; k++) {
		jpeg_component_info *ci = &d->comp_info[k];
		dcoef[k] = (*d->mem->request_virt_barray)((j_common_ptr)d, JPOOL_IMAGE, FALSE,
			wi * ci->h_samp_factor, hi * ci->v_samp_factor, ci->v_samp_factor);
	}
	c->dest.cap = n < 4096 ? 4096 : n;
	c->dest.buf = malloc(c->dest.cap);
	if (c->dest.buf == NULL) {
		strcpy(msg, "out of memory");
		goto done;
	}
	c->dest.pub.init_destination = brand_cut_init_dest;
	c->dest.pub.empty_output_buffer = brand_cut_empty;
	c->dest.pub.term_destination = brand_cut_term_dest;
	c->dest.pub.next_output_byte = c->dest.buf;
	c->dest.pub.free_in_buffer = c->dest.cap;
	d->dest = &c->dest.pub;
	jpeg_write_coefficients(d, dcoef);

	for (int k = 0; k < d->num_components; k++) {
		int hs = d->comp_info[k].h_samp_factor, vs = d->comp_info[k].v_samp_factor;
		JDIMENSION bx = x0 / iw * hs, by = y0 / ih * vs;
		JDIMENSION bw = wi * hs, bh = hi * vs;
		for (JDIMENSION r = 0; r < bh; r += vs) {
			JBLOCKARRAY sb = (*s->mem->access_virt_barray)((j_common_ptr)s, scoef[k], by + r, vs, FALSE);
			JBLOCKARRAY db = (*d->mem->access_virt_barray)((j_common_ptr)d, dcoef[k], r, vs, TRUE);
			for (int i = 0; i < vs; i++) {
				memcpy(db[i], sb[i] + bx, bw * sizeof(JBLOCK));
			}
		}
	}
	jpeg_finish_compress(d);
	*outn = c->dest.cap - c->dest.pub.free_in_buffer;
	*out = c->dest.buf;
	c->dest.buf = NULL;
	*ox = x - x0;
	*oy = y - y0;
	ret = 0;
done:
	if (c->d_created) {
		jpeg_destroy_compress(&c->d);
	}
	jpeg_destroy_decompress(&c->s);
	free(c->dest.buf);
	free(c);
	return ret;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// canCut: this build cuts JPEGs with libjpeg's coefficient API.
const canCut = true

// cutJPEG is CropJPEG, appending the cut JPEG to dst: spliced (splice.go)
// where the source is a one-scan sequential JPEG the splice takes, else
// with libjpeg's coefficients (cutCoefficients); optimize computes
// Huffman tables for the cut image (a second pass over its coefficients,
// so never spliced) instead of the standard ones.
func cutJPEG(dst, src []byte, x, y, w, h int, optimize bool) ([]byte, int, int, error) {
	if err := cuttable(src); err != nil {
		return dst, 0, 0, err
	}
	if !optimize {
		if out, ox, oy, ok := spliceJPEG(dst, src, x, y, w, h); ok {
			return out, ox, oy, nil
		}
	}
	return cutCoefficients(dst, src, x, y, w, h, optimize)
}

// cutCoefficients is the cut by libjpeg's coefficient API, which takes
// every JPEG the GPU path cuts: the blocks' coefficients read, copied
// and coded again.
func cutCoefficients(dst, src []byte, x, y, w, h int, optimize bool) ([]byte, int, int, error) {
	var msg [C.JMSG_LENGTH_MAX]C.char
	var out *C.uchar
	var n C.ulong
	var ox, oy C.int
	opt := C.int(0)
	if optimize {
		opt = 1
	}
	r := C.brand_cut((*C.uchar)(unsafe.Pointer(&src[0])), C.ulong(len(src)), C.int(x), C.int(y), C.int(w), C.int(h),
		opt, &out, &n, &ox, &oy, &msg[0])
	switch r {
	case 0:
		dst = append(dst, unsafe.Slice((*byte)(unsafe.Pointer(out)), int(n))...)
		C.free(unsafe.Pointer(out))
		return dst, int(ox), int(oy), nil
	case 1:
		return dst, 0, 0, fmt.Errorf("%w: %s", errNotCut, C.GoString(&msg[0]))
	}
	return dst, 0, 0, fmt.Errorf("%w: jpeg: %s", ErrDecode, C.GoString(&msg[0]))
}
