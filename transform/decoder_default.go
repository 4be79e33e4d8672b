//go:build !(cgo && brand_turbojpeg)

package transform

// DefaultJPEGDecoder is the best decoder this build has: the pure-Go one,
// as this binary was built without the brand_turbojpeg tag (which needs
// cgo and libturbojpeg; scripts/install-turbojpeg.sh).
func DefaultJPEGDecoder() JPEGDecoder { return StdJPEG{} }

// JPEGDecoderBuild names DefaultJPEGDecoder for people (`brand version`,
// the start-up log).
func JPEGDecoderBuild() string { return "Go's image/jpeg (pure Go)" }
