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

// CutNames returns the members a pipeline of Output GPUJPEG gives an
// image member it cuts: the cut JPEG ("n01/img_13.jpg" becomes
// "n01/img_13.cut") and what is left to do (GPUCrop.AppendBox,
// "n01/img_13.cut.json"), and whether the member is an image. Neither
// name is an image's (OutputName), so a stage that meets a sample a peer
// cut already passes it through.
func CutNames(member string) (jpeg, box string, ok bool) {
	out, ok := OutputName(member)
	if !ok {
		return "", "", false
	}
	stem := out[:len(out)-len(OutputExt)]
	return stem + "cut", stem + "cut.json", true
}
