// Package transform turns a sample's image into the tensor a trainer
// consumes: decode, the standard augmentations, and a uint8 tensor in
// numpy's .npy form, as pure, seeded functions of (pipeline, image bytes,
// job seed, epoch, sample ID).
//
// # Why
//
// A trainer does not consume JPEG bytes but decoded, augmented tensors,
// and decoding and augmenting costs it about 3 ms of CPU an image — most
// of its data-loading CPU once Brand has made reading cheap. Moving that
// work into the gateway, next to the bytes, frees the training node's
// cores; doing it deterministically keeps what Brand promises for bytes:
// a batch is the same from every replica, after a restart, at any world
// size and after an exact resume. This package is that work, with no
// knowledge of HTTP, caches or batches; the gateway wires it in.
//
// # Pipelines
//
// A pipeline (Spec) is a list of operators from a menu covering the
// standard image recipes — resize (shorter side), center_crop,
// random_resized_crop, hflip — with torchvision's semantics, applied after
// decoding (JPEG, PNG) and followed by the output tensor (CHW by default).
// Two are built in, torchvision's ImageNet recipes: imagenet-train
// (RandomResizedCrop(224), RandomHorizontalFlip) and imagenet-eval
// (Resize(256), CenterCrop(224)); and, in a build with libjpeg-turbo,
// imagenet-train-gpu, imagenet-train's draws sending each JPEG cut to its
// crop for the trainer's GPU decoder (Output GPUJPEG, Pipeline.GPUCrop). A server adds or replaces pipelines with
// a JSON configuration (Config); a Set holds them by name, and an unknown
// name is ErrUnknownPipeline listing the names there are.
//
// Resampling is Pillow's bilinear, reproduced rather than approximated:
// given the same decoded pixels the output is bit for bit what
// torchvision's transforms give with Pillow. Pixel values then depend only
// on the decoder: libjpeg-turbo (-tags brand_turbojpeg, what Pillow links)
// gives Pillow's exactly; image/jpeg (the default, pure Go) differs by its
// IDCT, within ±3 levels. docs/transform.md §6 states the bounds and how
// they are tested.
//
// # Determinism
//
// Every random choice — a crop box, a flip — is drawn from a stream
// seeded by the sample's key and the operator's position in the pipeline,
// and by nothing else: not the world size, the rank, the node, the
// decoder or the time. A server's key for a sample is SampleKey: a seed
// drawn from the job's seed and the sample's dataset (so that a mixture's
// datasets draw apart), the epoch of the sample's order, its ID. The draws are torchvision's
// get_params with Brand's generator (internal/seeded, in a domain of its
// own) and a logarithm and exponential defined by IEEE operations alone,
// so that every architecture and the Python reference
// (python/brand/transform.py) draw the same boxes. The geometry (a plan)
// is decided from the image's size and the draws before any pixel is
// decoded, so a decoder can change pixels, never boxes or flips.
//
// # Costs
//
// Per image, one goroutine, measured in docs/transform.md §7: about
// 1.7 ms of CPU for imagenet-train with libjpeg-turbo (Pillow with
// torchvision: 2.0 ms on the same images, in the same run) and 4.5 ms
// with the pure-Go decoder. Operators fuse: a crop and the resize after it, or a resize and
// the crop after it, are one resampling that computes only the pixels
// kept, and the decoder is told which part of the image the first step
// reads (libjpeg decodes only those rows and columns, at 1/2, 1/4 or 1/8
// scale when the step shrinks by that much and the pipeline allows it).
// An image costs a few buffers of its decoded size, reused through a
// Scratch, and its decoder's own (a progressive JPEG's coefficients):
// Pipeline.Footprint says how much from the header, before anything is
// decoded, so that a server can admit it (docs/transform.md §10). A
// header claiming more pixels than Options.MaxPixels is refused before
// any pixel is allocated (ErrTooLarge).
//
// Apply reports each image's thread CPU time (Result.CPU); a Meter sums
// them per pipeline for a server's figures, and CoresFor turns a measured
// cost into the cores a target rate needs.
//
// # Stability
//
// The draws are a specification (docs/transform.md §3–§5), fixed like the
// shuffle's: testdata/draws.json pins them, and the Python reference must
// agree with Go on it and on random inputs. Changing a constant, the
// order of draws or an operator's semantics changes every transformed
// epoch ever served.
//
// # Concurrency
//
// A Pipeline and a Set are immutable and safe for concurrent use; a
// Scratch belongs to one goroutine at a time. The package holds no
// mutable state: a server's worker pool calls Apply from as many
// goroutines as it has workers, each with its own Scratch and output
// buffers.
package transform
