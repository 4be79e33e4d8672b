//go:build !brand_libav

package cmdtest

// buildTags are the build tags of the test, which the commands are built
// with too.
var buildTags []string
