package chunkindex

import "strings"

// SplitKey splits a tar member path into its WebDataset sample key and
// extension: the key is the path up to the first '.' of the base name and the
// extension is everything after that dot.
//
//	train/n01/x.JPEG -> "train/n01/x", "JPEG"
//	a/b.c.d          -> "a/b", "c.d"
//	a.b/c            -> "a.b/c", ""
//
// A name whose base name has no dot is its own key with an empty extension.
// Dots in directory names never split, which is what lets datasets keep
// dotted directory names without merging unrelated samples.
func SplitKey(name string) (key, ext string) {
	base := strings.LastIndexByte(name, '/') + 1
	dot := strings.IndexByte(name[base:], '.')
	if dot < 0 {
		return name, ""
	}
	return name[:base+dot], name[base+dot+1:]
}

// memberNameProblem says why name cannot be a sample member, or returns "".
// WebDataset readers silently drop members whose base name starts with a dot
// (there is no key stem to group them by); Brand refuses them instead, so an
// index never lists a sample that a WebDataset reader would not produce.
func memberNameProblem(name string) string {
	switch base := name[strings.LastIndexByte(name, '/')+1:]; {
	case name == "":
		return "empty member name"
	case base == "":
		return "member name ends in '/'"
	case base[0] == '.':
		return "base name starts with '.', so it has no sample key"
	}
	return ""
}
