//go:build brand_libav

package cmdtest

// buildTags are the build tags of the test, which the commands are built
// with too: a test built to decode video runs a brand that decodes it.
var buildTags = []string{"brand_libav"}
