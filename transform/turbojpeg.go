//go:build cgo && brand_turbojpeg

package transform

/*
#cgo LDFLAGS: -ljpeg
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>

struct brand_err {
	struct jpeg_error_mgr pub;
	jmp_buf jump;
	char msg[JMSG_LENGTH_MAX];
	int truncated;
};

static void brand_error_exit(j_common_ptr c) {
	struct brand_err *e = (struct brand_err *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jump, 1);
}

// Warnings are kept quiet, except that running out of data is noted: the
// image is then incomplete (libjpeg fills the rest with grey), which PIL
// refuses too.
static void brand_emit_message(j_common_ptr c, int level) {
	struct brand_err *e = (struct brand_err *)c->err;
	if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
		e->truncated = 1;
		(*c->err->format_message)(c, e->msg);
	}
}

// brand_decode decodes rows [y, y+h) and at least columns [x, x+w) of the
// JPEG scaled by 1/denom, as packed RGB into dst (w+32 by h pixels at
// most), with libjpeg's defaults (accurate integer IDCT, fancy
// upsampling). Columns start at an iMCU boundary at or before x: *ox and
// *ow return the columns decoded. It returns 0, or -1 with msg set.
static int brand_decode(const unsigned char *src, unsigned long n, int denom,
		int x, int y, int w, int h, unsigned char *dst, size_t cap, int *ox, int *ow, char *msg) {
	struct jpeg_decompress_struct cinfo;
	struct brand_err jerr;
	cinfo.err = jpeg_std_error(&jerr.pub);
	jerr.pub.error_exit = brand_error_exit;
	jerr.pub.emit_message = brand_emit_message;
	jerr.truncated = 0;
	jerr.msg[0] = 0;
	if (setjmp(jerr.jump)) {
		jpeg_destroy_decompress(&cinfo);
		strcpy(msg, jerr.msg);
		return -1;
	}
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, src, n);
	jpeg_read_header(&cinfo, TRUE);
	cinfo.out_color_space = JCS_RGB;
	cinfo.scale_num = 1;
	cinfo.scale_denom = denom;
	jpeg_start_decompress(&cinfo);
	JDIMENSION cx = x, cw = w;
	if (cx != 0 || cw != cinfo.output_width) {
		jpeg_crop_scanline(&cinfo, &cx, &cw);
	}
	if ((size_t)cw * h * 3 > cap) {
		jpeg_destroy_decompress(&cinfo);
		snprintf(msg, JMSG_LENGTH_MAX, "cropped to %u columns, more than the buffer holds", (unsigned)cw);
		return -1;
	}
	if (y > 0) {
		jpeg_skip_scanlines(&cinfo, y);
	}
	while (cinfo.output_scanline < (JDIMENSION)(y + h)) {
		JSAMPROW row = dst + (size_t)(cinfo.output_scanline - y) * cw * 3;
		jpeg_read_scanlines(&cinfo, &row, 1);
	}
	// The rows below are never entropy-decoded.
	jpeg_abort_decompress(&cinfo);
	jpeg_destroy_decompress(&cinfo);
	if (jerr.truncated) {
		strcpy(msg, jerr.msg);
		return -1;
	}
	*ox = cx;
	*ow = cw;
	return 0;
}

// brand_turbo_version is libjpeg-turbo's version number (2001005 for
// 2.1.5) of the headers this was built with, or 0.
static int brand_turbo_version(void) {
#ifdef LIBJPEG_TURBO_VERSION_NUMBER
	return LIBJPEG_TURBO_VERSION_NUMBER;
#else
	return 0;
#endif
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// TurboJPEG decodes with libjpeg-turbo through cgo (Debian's
// libjpeg62-turbo, the library PIL links): its accurate integer IDCT and
// fancy upsampling, so its pixels are PIL's; DCT scaling (1/2, 1/4, 1/8,
// as PIL's draft); and partial decoding — only the rows and columns the
// first step reads are inverse-transformed, upsampled and converted
// (jpeg_crop_scanline, jpeg_skip_scanlines), and the entropy-coded data
// below the last needed row is never decoded. CMYK and YCCK JPEGs, which
// libjpeg will not convert to RGB, go to StdJPEG. Built only with the
// brand_turbojpeg tag (scripts/install-turbojpeg.sh installs the library).
type TurboJPEG struct{}

// Name implements JPEGDecoder.
func (TurboJPEG) Name() string { return "turbojpeg" }

// turboVersion is the libjpeg-turbo version of the headers this package
// was built with ("2.1.5"), or "(version unknown)".
func turboVersion() string {
	v := int(C.brand_turbo_version())
	if v == 0 {
		return "(version unknown)"
	}
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}

// DecodeJPEG implements JPEGDecoder.
func (TurboJPEG) DecodeJPEG(buf, data []byte, h header, denom int, need Rect) (Region, int, error) {
	if h.cmyk {
		return StdJPEG{}.DecodeJPEG(buf, data, h, 1, need)
	}
	sw, sh := ceilDiv(h.w, denom), ceilDiv(h.h, denom)
	if need.W <= 0 || need.H <= 0 || !need.inside(sw, sh) {
		need = Rect{W: sw, H: sh}
	}
	// One column of margin each side: libjpeg's fancy upsampling treats a
	// cropped row's ends as the image's edges, so the columns there may
	// differ from a full decode; the margin keeps them out of what is used.
	x0, x1 := max(need.X-1, 0), min(need.X+need.W+1, sw)
	// Columns start at most one iMCU (32 pixels at most) before x0.
	out := grow(buf, (x1-x0+32)*need.H*3)
	var msg [C.JMSG_LENGTH_MAX]C.char
	var ox, ow C.int
	r := C.brand_decode((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), C.int(denom),
		C.int(x0), C.int(need.Y), C.int(x1-x0), C.int(need.H), (*C.uchar)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &ox, &ow, &msg[0])
	if r != 0 {
		return Region{}, 0, fmt.Errorf("%w: jpeg: %s", ErrDecode, C.GoString(&msg[0]))
	}
	img := image8{pix: out[:int(ow)*need.H*3], w: int(ow), h: need.H}
	return Region{Image: img, X: int(ox), Y: need.Y}, denom, nil
}

// work implements JPEGDecoder: libjpeg keeps every block's coefficients
// (2 bytes each) of a progressive or multi-scan JPEG, a few rows of
// each component at the decode's scale, and the region of RGB rows it
// writes, whole iMCUs wide (DecodeJPEG's buffer).
func (TurboJPEG) work(h header, denom int, need Rect) (int64, int, int) {
	if h.cmyk {
		return StdJPEG{}.work(h, 1, need)
	}
	sw, sh := ceilDiv(h.w, denom), ceilDiv(h.h, denom)
	if need.W <= 0 || need.H <= 0 || !need.inside(sw, sh) {
		need = Rect{W: sw, H: sh}
	}
	var n int64
	if h.jpeg.progressive || h.jpeg.multiScan {
		n += 128 * h.jpeg.blocks(h.w, h.h)
	}
	n += 64 * int64(sw+64) * int64(max(len(h.jpeg.comps), 3))
	x0, x1 := max(need.X-1, 0), min(need.X+need.W+1, sw)
	return n, x1 - x0 + 32, need.H
}
