//go:build cgo && brand_turbojpeg

package transform

// decoders are the JPEG decoders this build has, each of which the decode
// tests run.
func decoders() []JPEGDecoder { return []JPEGDecoder{StdJPEG{}, TurboJPEG{}} }
