//go:build cgo && brand_turbojpeg

package transform

// DefaultJPEGDecoder is the best decoder this build has: libjpeg-turbo,
// as this binary was built with the brand_turbojpeg tag.
func DefaultJPEGDecoder() JPEGDecoder { return TurboJPEG{} }
