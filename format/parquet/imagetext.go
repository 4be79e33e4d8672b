package parquet

import (
	"fmt"
	"strings"

	"github.com/brandgw/brand/format"
)

// ImageText refuses a dataset whose rows are not image-text samples as
// package vision reads them (format.ImageText): a row is one when one
// of its columns becomes its image member, KEY.jpg or KEY.png (an image
// column, binary or struct{bytes, path}, alone of its kind, or a column
// --members sets to jpg, jpeg or png), and one its text, KEY.txt (a
// string column) or KEY.json (a conversation: a list of {from, value}
// structs). Columns qualified by their names (two image columns, two
// string columns) are members vision does not read: the error names
// them, and --members chooses.
func (c *columns) ImageText() error {
	var images, qualified, texts []string
	for i, f := range c.fields {
		name := fmt.Sprintf("%s (%s)", f.name, c.pub[i].Type)
		switch ext := strings.ToLower(f.ext); {
		case f.kind == kindImage && !f.forced && f.ext == "", f.forced && (ext == "jpg" || ext == "jpeg" || ext == "png"):
			images = append(images, name)
		case f.kind == kindImage && !f.forced:
			qualified = append(qualified, name)
		case f.ext == "txt" || f.ext == "json":
			texts = append(texts, name)
		}
	}
	var all []string
	for i, f := range c.fields {
		member := "." + c.pub[i].Ext
		if c.pub[i].Ext == "" {
			member = ".jpg, .png, … by its bytes"
		}
		all = append(all, fmt.Sprintf("%s (%s, member %s)", f.name, c.pub[i].Type, member))
	}
	const how = "a vision job reads one image column (binary, or struct{bytes, path}) and a text column (string) or a conversation (a list of {from, value} structs)"
	switch {
	case len(qualified) > 0 && len(images) == 0:
		return fmt.Errorf("%w: image columns %s are each qualified by their names, and a vision sample reads one image: choose it with --members COLUMN=jpg (the columns are %s)",
			format.ErrNotImageText, strings.Join(qualified, ", "), strings.Join(all, ", "))
	case len(images) == 0:
		return fmt.Errorf("%w: no image column: %s; the columns are %s", format.ErrNotImageText, how, strings.Join(all, ", "))
	case len(texts) == 0:
		return fmt.Errorf("%w: no text or conversation column read as the sample's text (.txt or .json): %s; the columns are %s (two string columns are qualified by their names: choose the text with --members COLUMN=txt)",
			format.ErrNotImageText, how, strings.Join(all, ", "))
	}
	return nil
}

// UnreadImage reports whether ext is one an image column's value gets
// (by its path or its bytes, imageExt) that is not JPEG's or PNG's:
// "bin" for bytes of no image's magic (an empty or damaged value),
// another format's ("webp", "gif", ...). Only a column left to its
// values' extensions gives them: one --members sets gives its own.
func (c *columns) UnreadImage(ext string) bool {
	switch ext {
	case "jpg", "jpeg", "png":
		return false
	}
	for _, f := range c.fields {
		if f.kind == kindImage && !f.forced && f.ext == "" {
			return ext == "bin" || imageExts[ext]
		}
	}
	return false
}
