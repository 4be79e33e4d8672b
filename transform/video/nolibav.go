//go:build !(cgo && brand_libav)

package video

import "fmt"

// available reports that this build decodes video: not without the
// brand_libav tag.
const available = false

func libavVersion() string { return "" }

func decoderName(codec) string { return "" }

func cHeap() int64 { return 0 }

// openCodec refuses: this binary was built without libavcodec.
func openCodec(_ Stream, c codec, _ int64, _ int, _ int64) (codecContext, error) {
	return nil, fmt.Errorf("%w: cannot decode %s", ErrNoDecoder, c)
}
