//go:build !(cgo && brand_turbojpeg)

package transform

import "fmt"

// canCut: this build cannot cut a JPEG (Output GPUJPEG is refused).
const canCut = false

// cutJPEG refuses in the pure-Go build: image/jpeg decodes to pixels and
// has no access to a JPEG's coefficients, so a lossless cut needs libjpeg
// (the brand_turbojpeg tag, which needs cgo; scripts/install-turbojpeg.sh).
func cutJPEG(dst, src []byte, x, y, w, h int, optimize bool) ([]byte, int, int, error) {
	if err := cuttable(src); err != nil {
		return dst, 0, 0, err
	}
	return dst, 0, 0, fmt.Errorf("%w: %w", errNotCut, errNoCutBuild)
}
