// Package client is the Go client of the Brand gateway, which serves
// seeded, shuffled batches of a WebDataset-style dataset over HTTP.
//
// A batch is fully determined by the job (an api.Job: dataset, seed, batch
// size, shuffle window, world size, rank, drop_last) and its epoch and batch
// number, so a training worker needs no coordination with its peers: each
// rank asks for its own share of each batch, and a restarted worker can
// resume at any batch. Job parameters left zero in Options.Job are the
// gateway's defaults, except the seed and drop_last, which are always sent
// so that a job's order never depends on how a gateway was started.
//
// # Example
//
// Each worker of an 8-rank job reads its share of every epoch:
//
//	c, err := client.New("http://brand:8080", client.Options{
//		Job: api.Job{Dataset: "imagenet", Params: shuffle.Params{
//			Seed: 7, BatchSize: 256, World: 8, Rank: rank,
//		}},
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
// # Resuming an epoch
//
// Epoch reads an epoch from its start. A job that stops in the middle of
// one, and restarts with the same or another number of ranks or batch
// size, resumes with EpochFrom(ctx, epoch, offset), where offset is the
// number of the epoch's samples the job consumed over all ranks:
//
//	offset = start + consumed × batch_size × world, capped at the epoch's samples
//
// with start the offset the interrupted run began the epoch at (0 for
// Epoch), consumed the batches every rank had trained on, and batch_size
// and world those of the interrupted run. ResumeOffset computes it from
// a plan of that run's, and the plan of the last batch consumed,
// Batch.Plan, is the one to give it:
//
//	for b, err := range c.EpochFrom(ctx, epoch, start) {
//		... // train on b
//		offset := client.ResumeOffset(b.Plan, b.Index+1) // a checkpoint's, after this step
//	}
//
// The cap is the epoch's samples as they are when the checkpoint is
// taken. A named job's edits change them mid-epoch, from the step an
// edit names: an append record (Client.Append) grows the epoch and an
// exclusion list (Client.Exclude) shrinks it. The batches from there
// report the new size, and the loop asks for the plan again and goes on
// to the new end under it, which each batch's Plan is. The plan taken
// when the epoch began (EpochInfo) is exact only while the epoch keeps
// its size: with it, the offset of a job that read past a grown epoch's
// old end is capped there, and the resume reads those samples again; the
// offset after the whole of a shrunk epoch lies past its new end, which
// the gateway answers 404. A plan asked for when the job resumes
// (EpochInfoFrom(ctx, epoch, start)) gives the same offset as Batch.Plan.
//
// Every rank of the resumed job passes the same offset and reads its
// share of the rest, numbered from batch 0; together they read each
// remaining sample exactly once, since the epoch's order depends only on
// the dataset, seed and window (and a named job's edits, which apply
// only from steps no rank has read). Later epochs are read with Epoch as
// usual. The offset is an argument, not an option, because it
// belongs to one epoch: Options.Job.Offset must be 0.
//
// # Clusters
//
// A cluster of gateways (brand serve --peers) serves any request from any
// node with the same bytes, but each rank's samples are cached on its home
// node, ⌊rank·N/world⌋ of the N nodes. Given the peer list (Options.Peers)
// or told to ask for it (Options.Discover, GET /cluster), the client sends
// every request of its rank to the home. An attempt that fails there as a
// retry would (a refused or reset connection, a timeout, 502, 503, 504)
// is made again at once on the next node in order, home+1, home+2, … mod
// N, and the failed node is passed over for Options.HomeRetry (10 s), so
// a rank returns home once its node is back. A node that accepts the
// request but sends nothing fails the same way within seconds: after
// a deadline learnt from its nodes' answers (three times the 95th percentile of
// its recent attempts' time to headers, at least 100 ms, at most
// Options.ProbeAfter, 3 s) without response headers the client probes
// its GET /healthz, and abandons the attempt if that gets no answer
// within as long (250 ms to 1 s); a node that answers is only slow, and
// is waited for, probed again every ProbeAfter. A body that stops
// arriving (the deadline, at least 250 ms, without a byte read) fails
// over at once, unprobed: a node sends a batch's headers only once it
// holds it whole, so a node stopped or cut off while it wrote a batch
// fails over too, and the caller gets the batch once, from the node
// that answered it whole. The node a request goes to after a node that
// answered nothing, or whose body stopped, is told which node that was
// (Brand-Unanswered), for it to read that node's chunks elsewhere.
// Failing over spends the same bounded retry budget (MaxRetries); the
// client waits between attempts only once a call has tried every node.
// Batch.Node says which node served a batch.
//
// # Index versions
//
// A client reads one version of the dataset's index for its whole life:
// Options.Job.Index if given, else the one the first answer names
// (Client.Index), which every later request names (index=). A dataset
// re-packed under a running job therefore never changes the order it
// reads: a gateway that does not hold the version answers 409, the client
// asks the next node (a node that merely holds another version is not
// taken for down), and when none holds it the call fails with
// ErrIndexChanged. An answer from another version than the client's (a
// request sent before the version was known) is ErrIndexChanged too, and
// every batch of an epoch is checked against the epoch's plan, so two
// orders are never mixed. To resume a job on the version it began with,
// store Client.Index in the checkpoint and pass it back as
// Options.Job.Index.
//
// # Membership versions
//
// On a cluster, each epoch is read under the membership version its first
// answer names (Client.Members), so that ranks of one step never get its
// samples under two layouts. The gateways keep every version's member
// list in the datasets' stores, so an epoch goes on under its version
// after every node has restarted; a version no node can find any more is
// ErrMembersUnknown once every node has said so, never a move to another
// version by this rank alone: start the epoch again on every rank.
//
// # Mixtures
//
// Options.Job.Mix reads a mixture of datasets instead of one: each
// component's own shuffled order, interleaved so that every block of K
// consecutive epoch positions holds each component in proportion to its
// weight (docs/shuffle.md §11). The client's Epoch, EpochFrom, Batch,
// BatchRaw and Manifest read it as they read one dataset; each sample's
// Dataset names its component (keys are unique only within a dataset).
//
//	c, err := client.New("http://brand:8080", client.Options{
//		Job: api.Job{Mix: api.Mix{{Dataset: "web", Weight: "0.7"}, {Dataset: "code", Weight: "0.3"}},
//			Params: shuffle.Params{Seed: 7, BatchSize: 256, World: 8, Rank: rank}},
//	})
//
// The mixture's order depends on its block K (Options.Job.MixBlock),
// which defaults to BatchSize × World, the world size the job starts
// with. The client fixes it at New (or from the first answer, when the
// job leaves the batch size or world to the gateway) and sends it with
// every request; Client.MixBlock says which it is. A job that resumes at
// another world size passes the offset (ResumeOffset) to EpochFrom and
// the K it began with as Options.Job.MixBlock, so both belong in its
// checkpoint. A mixture names no dataset, index version or importance
// sampling (New refuses them); the components' index versions are pinned
// by the first answer and checked on every later one (Client.Index).
//
// Two adjacent samples of a mixture's batch can share a key (two
// components store it, or a small component repeats), and grouping tar
// members by key cannot always tell where one ends. When a batch's
// grouping could be wrong — fewer groups than Brand-Batch-Samples, or two
// adjacent groups with one key — Batch and Epoch fetch its manifest with
// the same query and cut the body by the manifest's sample lengths,
// checking them against the members' ends and keys; other batches cost
// no second request. BatchRaw does not decode, so it does not split.
//
// A schedule stored under the job's name (Options.Job.Name, with
// Options.Job.ScheduleVersion "latest") is read by every rank alike and
// edited while the job trains: EditSchedule with api.EditFrom{Next: true}
// edits from the first step no request has read, which the gateway takes
// as it makes the edit, so read-ahead never races it; the version made
// names the step (FromStep). An edit from a step read is refused with an
// *APIError naming the first step an edit could start at
// (FirstEditableStep).
//
// # Tensors
//
// Options.Job.Transform names a pipeline of the gateway's
// (imagenet-train, imagenet-eval, or one its --transform-config defines):
// each image member of a sample then arrives as a .npy member holding its
// decoded, augmented uint8 tensor, drawn from the sample's key alone, so
// a batch's tensors are the same from every node and after a resume
// (docs/transform.md). ParseNPY reads one in place — its dtype, shape and
// bytes, a slice of the batch's buffer:
//
//	c, err := client.New("http://brand:8080", client.Options{
//		Job: api.Job{Transform: "imagenet-train", Params: shuffle.Params{Seed: 7, BatchSize: 256}},
//	})
//	...
//	t, err := client.ParseNPY(s.Files["npy"]) // t.Shape [3 224 224], t.DType "|u1", t.Data
//
// A mixture's batch whose grouping by key is ambiguous (see Mixtures) is
// refused when transformed: its manifest's lengths are the stored
// samples', not the tensors'.
//
// # Token jobs
//
// Options.Job.Seq packs a token dataset (Megatron .bin/.idx served in
// place) into sequences of Seq tokens, Pack "bestfit" (the default) or
// "concat" (with EOS, EOSSet): every sample of a batch is one sequence,
// and batch sizes, plans, offsets and ResumeOffset count sequences.
// Batch.Sequences views each as its input_ids and position_ids, []int32
// slices of the batch's buffer (Int32s does one member):
//
//	c, err := client.New("http://brand:8080", client.Options{
//		Job: api.Job{Dataset: "web", Seq: 4096, Params: shuffle.Params{Seed: 7, BatchSize: 8}},
//	})
//	for b, err := range c.Epoch(ctx, 0) {
//		seqs, err := b.Sequences() // seqs[i].InputIDs, seqs[i].PositionIDs: [4096]int32
//		// cu_seqlens: the positions where PositionIDs is 0, and 4096
//	}
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
