//go:build brand_turbojpeg

package cmdtest

// A test built with libjpeg-turbo runs a brand that has it too (one that
// serves transform=imagenet-train-gpu, which only libjpeg can cut).
func init() { buildTags = append(buildTags, "brand_turbojpeg") }
