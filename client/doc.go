// Package client is the Go client of the Brand gateway, which serves
// seeded, shuffled batches of a WebDataset-style dataset over HTTP.
//
// A batch is fully determined by the job parameters (dataset, seed, batch
// size, shuffle window, world size, rank, drop_last) and its epoch and batch
// number, so a training worker needs no coordination with its peers: each
// rank asks for its own share of each batch, and a restarted worker can
// resume at any batch. Parameters left zero in Options are the gateway's
// defaults.
//
// # Example
//
// Each worker of an 8-rank job reads its share of every epoch:
//
//	seed := uint64(7)
//	c, err := client.New("http://brand:8080", client.Options{
//		Dataset:   "imagenet",
//		Seed:      &seed,
//		BatchSize: 256,
//		World:     8,
//		Rank:      rank,
//	})
//	if err != nil {
//		return err
//	}
//	for epoch := range epochs {
//		for b, err := range c.Epoch(ctx, epoch) {
//			if err != nil {
//				return err
//			}
//			for _, s := range b.Samples {
//				train(s.Files["jpg"], s.Files["cls"])
//			}
//			b.Release()
//		}
//	}
//
// Epoch keeps a few batches requested ahead (Options.Ahead) and stops, with
// its outstanding requests cancelled, when the loop breaks. A batch's
// files are slices of one buffer holding its response; Release hands that
// buffer to a later batch once the loop is done with the samples (copy
// what must outlive them), which spares the allocation and most of the
// garbage collector's work. Batch fetches a
// single batch, BatchRaw streams one undecoded to a writer, and Manifest
// describes one without its bytes.
//
// # Errors and retries
//
// Answers of 502, 503 and 504, broken connections and bodies shorter than
// their Content-Length are retried with jittered exponential backoff,
// honouring the gateway's Retry-After up to Options.MaxBackoff. Other
// non-2xx answers are returned at once as an *APIError whose message says
// what to change (for an out-of-range batch, the valid range). Responses
// that break the API contract wrap ErrBadResponse.
package client
