// Package format is the seam between Brand and the kinds of dataset it
// serves in place: Parquet files (the Hugging Face Hub's layout), Mosaic
// MDS shards, Megatron indexed token files — each a package of its own
// behind the Format interface, chosen from a table the caller passes
// (cmd/brand), never from a registry here.
//
// # Why a seam, and why this one
//
// Everything Brand guarantees — the seeded chunk-then-sample order, the
// schedule-aware cache and prefetch, the planner, exact resume, one owner
// per chunk on a cluster, mixtures, server-side transforms — depends on two
// things only: chunks that are read whole with range reads, and samples
// inside them whose bytes can be served as tar members. A Parquet row
// group, an MDS shard and a span of a Megatron .bin are such chunks. A
// format therefore has two jobs and no more:
//
//   - Index: from the source's own metadata (Parquet footers, MDS's
//     index.json and shard headers, Megatron's .idx) — never its data
//     pages — say which chunks there are, in which objects, how many
//     samples each holds and their keys (Layout), and keep what decoding
//     will need (Layout.Meta). The one exception is a token dataset named
//     by Options.Tokens or Options.Text: its token column is read once to
//     count each document's tokens, which Layout.Meta then holds and the
//     decoder answers from (Tokens).
//   - Decode: turn the bytes a chunk's read fetched (Decoder.Extent's
//     ranges) into the chunk's resident form (below), within a size known
//     before the read (Extent's resident bound), so that the cache, the
//     planner and admission account every chunk exactly before it exists.
//
// The rest of Brand never asks which format it reads: it reads a chunk's
// Extent, calls Decode, and from then on holds a chunk like any other.
// What a format's samples can be beyond that, its decoder says by the
// interfaces it implements (Tokens: documents of tokens; ImageText:
// image-text samples a vision job reads), never a branch on its name.
//
// # The resident form
//
// A decoded chunk is a buffer of exactly the resident bound's length:
//
//	samples   each sample's members as tar entries (header, data, zero
//	          padding to 512 bytes), one sample after another from byte 0
//	(gap)     unused bytes up to the table (the bound is an upper bound)
//	table     per sample 16 bytes: offset u64, length u32, CRC32C u32
//	footer    magic "BRANDRES", version u32, samples u32, table offset u64,
//	          CRC32C of the table and of the footer's fields before it u32
//
// so a sample's bytes are one contiguous, block-aligned run of tar members,
// exactly as in a chunk `brand pack` writes, and every path that serves,
// copies, transforms, hands over or spills a tar chunk's samples serves a
// decoded chunk's the same way. The table replaces the index's per-sample
// ranges (which a format cannot know before decoding) and travels with the
// bytes: the disk tier, a peer receiving a chunk, or a reader of a copy
// finds and checks it with ReadTable and Verify. Writer writes the form;
// members' tar headers are deterministic (mode 0644, the given time, no
// owner), so every node decodes a chunk to the same bytes.
//
// # Bounds
//
// A format computes a chunk's resident bound from metadata alone, so it
// must be an upper bound that holds for any data consistent with the
// metadata; Writer refuses to write past it (ErrOverBound), and a chunk
// whose data does not fit is damaged, never truncated. Limits bounds what
// hostile metadata can make indexing allocate.
//
// # Concurrency
//
// A Format and the Decoders it opens are safe for concurrent use: many
// chunks decode at once. A Writer belongs to one decode.
package format
