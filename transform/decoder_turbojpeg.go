//go:build cgo && brand_turbojpeg

package transform

// DefaultJPEGDecoder is the best decoder this build has: libjpeg-turbo,
// as this binary was built with the brand_turbojpeg tag.
func DefaultJPEGDecoder() JPEGDecoder { return TurboJPEG{} }

// JPEGDecoderBuild names DefaultJPEGDecoder for people (`brand version`,
// the start-up log): libjpeg-turbo and the version of the headers it was
// built with.
func JPEGDecoderBuild() string { return "libjpeg-turbo " + turboVersion() }
