//go:build cgo && brand_turbojpeg

package transform

/*
#cgo LDFLAGS: -lturbojpeg
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

// decode decompresses at the given (scaled) size into dst as packed RGB.
// It returns 0, or -1 with the error in err (len bytes) and *fatal set
// unless the failure was only a warning.
static int decode(const unsigned char *src, unsigned long n, unsigned char *dst,
		int w, int h, char *err, int len, int *fatal) {
	tjhandle t = tjInitDecompress();
	if (t == NULL) {
		strncpy(err, tjGetErrorStr2(NULL), len - 1);
		*fatal = 1;
		return -1;
	}
	int r = tjDecompress2(t, src, n, dst, w, w * 3, h, TJPF_RGB, 0);
	if (r != 0) {
		strncpy(err, tjGetErrorStr2(t), len - 1);
		*fatal = tjGetErrorCode(t) == TJERR_FATAL;
	}
	tjDestroy(t);
	return r;
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// TurboJPEG decodes with libjpeg-turbo's TurboJPEG API through cgo, with
// DCT scaling (1/2, 1/4, 1/8: the IDCT computes fewer pixels, as PIL's
// draft), its accurate integer IDCT and fancy upsampling — PIL's own
// decoder, so full-size pixels are PIL's. CMYK and YCCK JPEGs (TurboJPEG
// will not convert them to RGB) go to StdJPEG. Built only with the
// brand_turbojpeg tag (scripts/install-turbojpeg.sh installs the library).
type TurboJPEG struct{}

// Name implements JPEGDecoder.
func (TurboJPEG) Name() string { return "turbojpeg" }

// DecodeJPEG implements JPEGDecoder.
func (TurboJPEG) DecodeJPEG(buf, data []byte, h header, denom int) (image8, int, error) {
	if h.cmyk {
		return StdJPEG{}.DecodeJPEG(buf, data, h, 1)
	}
	w, ht := ceilDiv(h.w, denom), ceilDiv(h.h, denom)
	out := image8{pix: grow(buf, w*ht*3), w: w, h: ht}
	var msg [200]C.char
	var fatal C.int
	r := C.decode((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), (*C.uchar)(unsafe.Pointer(&out.pix[0])),
		C.int(w), C.int(ht), &msg[0], C.int(len(msg)), &fatal)
	if r != 0 {
		text := C.GoString(&msg[0])
		// A warning is an error when the data ran out (PIL refuses a
		// truncated image too); others, such as stray bytes before a
		// marker, leave a complete image, which PIL accepts.
		if fatal != 0 || strings.Contains(text, "Premature end") {
			return image8{}, 0, fmt.Errorf("%w: jpeg: %s", ErrDecode, text)
		}
	}
	return out, denom, nil
}
