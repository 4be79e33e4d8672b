package transform

import "strings"

// OutputExt is the extension of a transformed image's member: the .npy
// tensor replaces the image in the sample ("n01/img_13.jpg" becomes
// "n01/img_13.npy"), and the sample's other members pass through.
const OutputExt = "npy"

// OutputName returns the member name a pipeline gives an image member, and
// whether the member is an image a pipeline reads (by its extension, as
// WebDataset names members: .jpg, .jpeg, .png, any case).
func OutputName(member string) (string, bool) {
	dot := strings.LastIndexByte(member, '.')
	if dot < 0 || strings.IndexByte(member[dot:], '/') >= 0 {
		return "", false
	}
	switch strings.ToLower(member[dot+1:]) {
	case "jpg", "jpeg", "png":
		return member[:dot+1] + OutputExt, true
	}
	return "", false
}
