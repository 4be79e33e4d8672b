// Package vision is the vision side of a token job (vision=, with seq=):
// image-text samples, each image counted as the vision tokens a model's
// encoder makes of it, packed whole into sequences of seq tokens, with
// each sequence's images resized on the data node.
//
// # Why
//
// A vision-language model's training sample is text with image
// placeholders plus its images; each image becomes a number of vision
// tokens fixed by its size after the model's resize, and a sequence holds
// text and vision tokens up to a budget. Teams write this in a collator
// per worker: decode and resize on the trainer's CPUs, count tokens, pack
// greedily in a small buffer. Its output depends on the worker and the
// buffer, so it cannot resume at another world size, and it pads. Here the
// counting needs only each image's header (Rule.Size), so an epoch's
// sequences are planned before a pixel is decoded, as a pure function of
// the job's parameters (Epoch), and the pixels are resampled by package
// transform's resampler, which is Pillow's bilinear bit for bit.
//
// # What a sample is
//
// A WebDataset-style sample (Reader.Read): a txt member, or without one
// a json conversation (LLaVA's turns, or chat messages; beside a txt, a
// json is metadata), and its images,
// KEY.jpg or KEY.png for one, KEY.0.jpg, KEY.1.png, … for several, in
// that order. A Parquet row served in place by format/parquet is one as
// its members are named: an image bytes column, a string column (txt),
// a list of {from, value} structs (json). Each Placeholder ("<image>") of the text stands for the
// next image; a text with none takes its images before it (a caption
// after its picture). The text between placeholders is tokenized by the
// job's tokenizer piece by piece, as a Hugging Face processor does with
// its image token an added token; each image becomes Rule.Start (if
// any), Rule.Tokens of Rule.Image, Rule.End (if any). The loss mask is 1
// on a txt's text and on a conversation's assistant turns, and 0 on
// other turns, vision tokens and pad.
//
// # Bad samples
//
// Nothing is ever served misaligned. A sample whose image is empty or
// whose header does not decode (ErrBadImage), an image the rule cannot
// size (ErrImageBounds), more pixels than the bound (transform's
// ErrTooLarge), a text whose placeholders are not its images
// (ErrPlaceholders), a text (a txt member, a conversation's turn) longer
// than the tokenizer reads (tokenize.MaxTextBytes: ErrTooLong, found
// before anything else of the sample, since an index of Parquet rows
// reads its length alone, LongText), a sample of more tokens than seq or
// more images than the cap (ErrTooLong: a sample with images is never
// split) fail the
// epoch naming the sample (Fail) or are skipped and counted (Skip, the
// --on-bad-image rule's two answers). An image whose header reads but
// whose pixels do not fails its sequence's write (a *PixelsError naming
// its sample): its tokens are laid out already, so under Skip the
// sequence is written again without that sample (its later samples
// moved up, the pad longer), and the sample named as skipped by the
// pack stage.
//
// # Memory
//
// Writer.Members resizes a sequence's images one after the other, each
// reserving its decode's memory (Reserve: its working memory,
// transform.Footprint.Work, and its tensor) from its header before a
// pixel is decoded, and giving it back once resized: a server reserves
// it from its decodes share, as its transform stage's images do, so
// vision jobs decoding large images at once wait for each other rather
// than overrun --memory-limit.
//
// # Costs
//
// Reader.Items reads every sample once (headers, tokenization); NewEpoch
// is O(samples · log) plus, per sample, a scan of the rooms of the open
// sequences of its window; an Epoch keeps every sequence. Measured
// (BenchmarkNewEpoch, 2 shared cores): 100,000 samples of a VLM-like mix
// in windows of 10,000 at seq 4,096, 0.6 µs a sample and 99.97 % fill
// without a cap; with 8 images a sequence, where the cap binds, 0.9 µs
// and 96.3 %. A server
// does not read every sample per job: a dataset's Facts (its samples'
// text tokens and image sizes, under no rule) are read once at index
// time and stored (FactsFile, docs/format.md §6.12), and each job makes
// its items from them (Rule.Items).
//
// # Concurrency
//
// Rule, Reader, Epoch and Writer are immutable and safe for concurrent
// use (a Reader if its Encoder is). The package holds no mutable state.
package vision
