// Package parquet serves Parquet files — the Hugging Face Hub's layout
// among them — in place, as a format.Format: a chunk is one or more
// consecutive row groups of one file, a row a sample, a top-level column a
// field. Pages are decoded by arrow-go
// (github.com/apache/arrow-go/v18/parquet), chosen by measurement over
// parquet-go (docs/format.md §6.4); footers are parsed here, by a
// Thrift reader that keeps only what Brand needs, so that a hostile footer
// costs what the limits allow and no more. The pages of a column that is
// not repeated, of byte arrays or integers, PLAIN or dictionary-encoded —
// an image's bytes and path, a label, a string — are read here too
// (flat.go), where arrow-go's reader copies the column chunk and
// decompresses every page into fresh memory (BenchmarkDecodeHub): a
// snappy page of byte arrays, or such a dictionary, is decompressed
// straight into the members its values become (snappy.go: a decoder
// that writes each piece of a block where it goes), one pass over an
// image's bytes; any other page once into a buffer of the node's pools
// (format.WriterOptions.Buffers) reused for the column chunk's pages,
// each value copied once from there into the resident form. From a store
// that reads ranges as streams, DecodeStream (format.Streamer) reads an
// image column's large pages from the body straight into the members
// their values become, placed on trust before the columns that fix the
// layout arrive (stream.go, placement.go; docs/format.md §6.4).
//
// # Chunks
//
// Index cuts each file's row groups, in order, into chunks of about
// format.Options.ChunkBytes (DefaultChunkBytes, 16 MiB, when 0): a row
// group joins the chunk before it, if of the same file, while that brings
// the chunk's column-chunk bytes nearer the target, its resident bound with
// every field stays within Limits.ChunkBytes and its rows within
// Limits.ChunkSamples. A chunk's extent is its row groups' column chunks of
// the fields read, adjacent ones merged (never widened over an unread
// column); Decode writes its row groups one after the other into one
// resident chunk, and damage names the row group. The description lists
// each chunk's count of row groups only when some chunk holds several: a
// description without that section (every one written before) is a chunk a
// row group. A chunk of several row groups is named by its first and last
// (format.Chunk.Name, "3-5"), one of a single row group by nothing, so
// that its key is its ordinal as before.
//
// # Keys
//
// A row's key is its object's key without ".parquet", "/", and the row's
// index in the file zero-padded to the number of digits of the file's row
// count: row 123 of data/train-00000-of-00042.parquet (of 41,000 rows) is
// "data/train-00000-of-00042/00123". Keys are stable as long as the file
// is; a file rewritten is a new index version.
//
// # Members
//
// A top-level column's values become members named key + "." + extension:
//
//	binary column, or struct{bytes, path}   image: the path's extension when it is an image's
//	                                        (jpg, jpeg, png, webp, gif, ...), else the bytes'
//	                                        magic (jpg, png, webp, gif, bmp, tiff), else "bin"
//	integer column                          "cls": decimal text, as WebDataset labels are
//	string (STRING, ENUM, JSON annotated)   "txt": the bytes as stored
//	list of integers                        "npy": a 1-D NumPy array of the column's integer
//	                                        type (<i4 for int32, |u1 for uint8, ...); a null
//	                                        element is 0
//	anything else                           "json": floats, booleans, structs, maps (JSON
//	                                        objects), lists of non-integers; binary values
//	                                        as base64, INT96 as Unix nanoseconds, NaN as null
//
// A null value is no member; a row none of whose selected columns has a
// value gets one empty member ".null" (the resident form has no empty
// samples). Options.Members sets a column's extension. When two columns
// would give the same extension (two integer columns; two image columns;
// an image column and a column set to an image extension), each of them
// not set by Options.Members is qualified with its column name, letters,
// digits, '_' and '-' kept and anything else made '_': "label.cls" and
// "label2.cls", "image.jpg" and "mask.png". Names that still collide are
// refused, naming both columns.
//
// # Bounds
//
// A row group's resident bound is computed from the footer: per member
// its header and its data padded to 512 bytes (so a value of at most 512
// bytes costs 1,024 whatever it is), per sample the table's entry; a
// chunk's, one table of all its rows and each of its row groups' members. What
// bounds a column's data:
//
//   - integers as text: 20 bytes a value; .npy: a 128-byte header a row and
//     the element size times num_values; JSON: per level of each leaf its
//     value's text or null (20 for an integer, 15 for a float, 24 for a
//     double; quotes more for a map's key) and a comma, per instance of
//     each node above it (one a row where nothing above it repeats, else
//     at most its first leaf's levels) its frame — brackets, braces or
//     null, a comma, and its name escaped, quoted and a colon where it is
//     an object's member (a list's or map's inner nodes are not) — and 6
//     bytes for each byte of a byte array (escaping): a list<float32>'s
//     bound is 4 times its floats' bytes, plus its members' headers;
//   - byte arrays read once each from PLAIN or DELTA_LENGTH_BYTE_ARRAY
//     pages: the column chunk's total_uncompressed_size;
//   - byte arrays a dictionary or front coding (DELTA_BYTE_ARRAY) could
//     repeat: the footer's size statistics (unencoded_byte_array_data_bytes)
//     where the writer gave them; else the footer cannot bound them, and
//     the column chunk's total_uncompressed_size stands in, as if each
//     value were read once: a row group whose dictionary repeats values
//     of over 512 bytes needs more, says how much when decoded
//     (format.GrowError), and the gateway decodes it into that much and
//     uses that size for it from then on. Indexing never reads a
//     dictionary page: for the Hub's image files (pyarrow puts a row
//     group's images in its dictionary) that would be reading the images.
//
// Decoding never writes past the bound (format.Writer refuses); a row
// group whose data does not fit a bound the footer does determine is
// damaged, named by column.
//
// # Damage
//
// Before a column chunk is read its page headers are walked: pages
// must tile the chunk, their sizes fit it, their values add up to the
// footer's count, their encodings be those the bound assumed, and a page
// CRC (which arrow-go does not check) must match. Any failure, a codec's,
// arrow-go's (a panic included) or the writer's, is an error wrapping
// format.ErrDamaged naming the object, the rows and the column.
//
// # Codecs and encodings
//
// UNCOMPRESSED, SNAPPY, GZIP, BROTLI, ZSTD, LZ4_RAW and the deprecated LZ4
// (Hadoop's framing, a bare block or a frame, read as Arrow C++ does).
// Every codec is registered again in arrow-go's table at init (inflate.go)
// so that no page inflates past the size its header states, whatever its
// bytes claim — arrow-go's own ZSTD decodes a frame with no content size
// whole, its Snappy allocates what a block's header claims — at index time
// and when decoding (package inflate; docs/format.md §6.10); PLAIN, dictionary
// (PLAIN_DICTIONARY, RLE_DICTIONARY), RLE and bit-packed levels,
// DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY,
// BYTE_STREAM_SPLIT; data pages v1 and v2. LZO, encryption and column data
// in other files are refused as format.ErrUnsupported.
//
// # Token datasets
//
// With format.Options.Tokens naming a list-of-integers column, Index reads
// that column's column chunks once (nothing else) and counts each row's
// elements from the pages' repetition and definition levels alone, run by
// run, never decoding values (nor decompressing a data page v2's); with
// Options.Text naming a string column and Options.Tokenizer a
// tokenizer file (a SentencePiece model or a byte-level BPE tokenizer.json,
// tokenize.Load), it tokenizes each row's text with package tokenize
// and keeps the counts. The counts (and the model's bytes) are a section
// of the description, and Open then returns a decoder implementing
// format.Tokens; a text dataset gains the field format.TextTokensField,
// each row's tokens as an int32 .npy, tokenized when decoded. A document
// past Limits.DocTokens is refused while counting; a decoded count other
// than the index's, or a list value outside its column's integer type, is
// damage (docs/format.md §6.7).
//
// # Long texts
//
// A reader of image-text samples that reads a text only up to a bound
// (the tokenizer's, when `brand index --tokenizer` reads their facts)
// decodes a chunk with DecodeTexts (format.TextBound): every text value
// past the bound is found from the footer's size statistics, the pages'
// headers and the values' length prefixes, read through a window of the
// decompressed page, and left unread — its page written again without
// it before the chunk is decoded (longtext.go). A token dataset's text
// (Options.Text) past the tokenizer's bound is refused so, naming its
// row.
//
// # Concurrency
//
// Format and the decoders Open returns are safe for concurrent use; each
// Decode makes its own readers.
package parquet
