// Package tensorize is the transform stage of every batch's path: it turns
// a read's samples into what a trainer consumes. Every image member of a
// sample (transform.OutputName: .jpg, .jpeg, .png) becomes a .npy member
// — a tar header with the new name and size, the tensor's bytes, padding
// — holding the job's pipeline applied with the sample's key; every other
// member passes through byte for byte. A pipeline that cuts for the
// trainer's GPU decoder (transform.GPUJPEG) gives each JPEG it cuts two
// members instead, the cut JPEG and what is left to do (cut.go), and
// every other image its tensor. A sample whose members are no images
// (one a peer transformed already) passes through whole, so the stage
// may be applied to a mixture of raw and transformed samples.
//
// # Why a stage of its own
//
// The work is CPU, not I/O: about 1.7 ms an ImageNet-sized photo with
// libjpeg-turbo, 4.5 ms with image/jpeg (docs/transform.md §7). It runs
// on a fixed pool of workers (Config.Workers, a node's cores by default),
// each with its own transform.Scratch, shared by every transform on the
// node — a batch's, a peer's request, a batch made ahead — so the CPU a
// node spends on images is bounded whatever its clients ask, and Load
// says how busy it is (what a peer deciding where to transform needs).
// Its queue is first come, first served, except that a call's work goes
// ahead of the queued work of its own job's later batches (Place), so
// that a trainer's steps asked for at once are made in step order.
//
// # Memory
//
// A sample's output size, and the working memory each of its images'
// decodes takes, are known from the images' headers and the draws before
// any pixel is decoded (transform.Pipeline.Footprint). A call takes its
// output at once from the copies beside the cache (Buffers: the memory
// manager's, --copy-bytes), refuses more than MaxBytes
// (--max-batch-bytes), and writes every sample into its place in that
// one buffer: no growth, no second copy. Each image reserves its working
// memory from the node's decodes (Decodes) before it decodes, and gives
// it back when done, so images that together need more than the node
// has wait for each other — within the budget's bound, then the call
// fails with chunkcache.ErrBusy (503 with Retry-After), whatever it does
// with bad images — and never overrun it. An image whose decode alone
// needs more than all the node has for decodes is refused from its
// header (transform.ErrTooLarge: a bad image, failed, skipped or kept).
// An image over the pixel bound is refused from its header, before
// anything is allocated for it; so is a good image whose tensor alone is
// over MaxBytes (a 1×100000 PNG resized to 256 on its shorter side makes
// 19.7 GB): the call fails with ErrTooLarge (400), whatever it does with
// bad images, before a tar header is written for it.
//
// # Failures
//
// An image that cannot be transformed (undecodable, truncated, over the
// pixel bound) fails the call with an error naming the sample and the
// member and wrapping transform.ErrDecode or transform.ErrTooLarge (Fail),
// or is left out and named (Skip), or is kept as it came (Keep: a peer's
// request, whose asker meets the same image and applies its own policy).
// A tensor over MaxBytes is not a bad image: it is never skipped or kept.
//
// # Concurrency
//
// A Stage is safe for concurrent use. Close stops the workers once the
// images they hold are done and waits for them; calls still waiting for
// a worker, and later calls, fail with ErrClosed.
package tensorize
