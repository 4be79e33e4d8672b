package layout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
)

// Source is what a job reads: one dataset version (DS), or, for a unit
// over several (a Composite: a mixture), none of its own — its unit names
// them — and the cluster membership its global batches are assigned to
// ranks under (nil on a single gateway). The membership never changes
// which samples a global batch holds, only which rank receives which of
// them.
type Source struct {
	DS      *catalog.Dataset
	Members *cluster.Membership
	// Index is the index version a job's answers name when it is not
	// DS's: the version a job with appends read before its first, which
	// it still pins ("" for DS's own).
	Index string
	// Edit is, for a named job with edits (api.Job.Edit), the newest of
	// its chain, with those before it: a batch is laid out under the
	// newest that changes it (Orders.under).
	Edit *Edit
	// Features are the job's features, checked against the table when it
	// was resolved (package resolve): which rank takes which sample
	// follows from them (Assigns).
	Features features.Set
	// Versions are, for a job whose chain has appends, the version it
	// read first and each version its appends grew it to, as the job
	// reads them (the last is DS): a batch is laid out over the version
	// of the chain up to the edit it is laid out under.
	Versions []*catalog.Dataset
	// Unit is the kind of batch the job serves, chosen from its
	// features when it was resolved (Orders.UnitOf; Orders.Compose for a
	// job over several datasets); nil for a source of one dataset laid
	// out without a resolution, whose features choose it then.
	Unit Unit
}

// Composite is s's unit over several datasets (a mixture), nil for a
// source of one dataset.
func (s Source) Composite() Composite {
	c, _ := s.Unit.(Composite)
	return c
}

// IndexID is the index version s's answers name (Brand-Index, an epoch's
// index): Index, else DS's.
func (s Source) IndexID() string {
	switch {
	case s.Index != "":
		return s.Index
	case s.Edit.Appends() > 0:
		return s.Edit.First()
	}
	return s.DS.ID()
}

// Assigns reports whether job's batches from s are assigned to ranks by
// locality (cluster.Assign over s.Members): on a cluster of more than one
// member, with more than one rank, for a job whose features keep
// locality (the table: balance= replaces it, a token or clip job's ranks take
// the plain cut). Otherwise each rank takes the plain cut or its
// balanced share, and nothing of the cluster enters the batch.
func (s Source) Assigns(job api.Job) bool { return s.assignment(job) == byLocality }

// features are the job's features as resolved (Features), or as its
// parameters name them for a source laid out without a resolution.
func (s Source) features(job api.Job) features.Set {
	if s.Features != 0 {
		return s.Features
	}
	return features.Requested(job)
}

// Datasets are the dataset versions s reads: its dataset, or its
// composite unit's.
func (s Source) Datasets() []*catalog.Dataset {
	if c := s.Composite(); c != nil {
		return c.Datasets()
	}
	return []*catalog.Dataset{s.DS}
}

// assignedUnder is the membership version a job's batches are assigned
// under, "" when they are plainly cut (Assigns).
func (s Source) assignedUnder(job api.Job) string {
	if s.Assigns(job) {
		return s.Members.Version()
	}
	return ""
}

// Name is the source as requests name it: the dataset's name, or its
// composite unit's (a mixture as written).
func (s Source) Name() string {
	if c := s.Composite(); c != nil {
		return c.Name()
	}
	return s.DS.Name
}

// Batch is one batch of a job laid out: everything the order and the
// index determine before any chunk is read — which samples, in which
// chunks, at which bytes, in which order, under which ETag.
//
// A batch reads one or more parts: one for a job over one dataset (its
// epoch's samples), a handful for a mixture (one per component pass the
// batch touches). Every stage after the layout — the use table's visit,
// the read, the response — works on parts, so that a mixture is no second
// path: one dataset is a batch of one part.
type Batch struct {
	Source
	Job          api.Job
	Epoch, Batch uint64
	Batches      int // global batches from the job's offset on
	EpochSamples int // samples in the epoch
	// Start and End are the epoch positions of this rank's slice (of the
	// mixture's epoch, for a mixture).
	Start, End int
	ETag       string
	Parts      []Part
	Take       []Take // per sample served, in order: its part and place there
	// Missing are the batch positions left out because their chunk is
	// damaged at rest (--on-damaged-chunk=skip), ascending, and
	// MissingKeys their keys; full is then the full batch's ETag.
	Missing     []int
	MissingKeys []string
	full        string
	// Content is what the batch serves when it is not the samples it
	// reads, made by its Unit (a token job's sequences, a clip job's
	// clips); nil for samples as stored.
	Content Content
	// Balanced is set for a balanced job's batch (api.Job.Balance): the
	// ranks' costs in its global batch.
	Balanced *Balanced
	// global names the batch's global batch (its rank 0's ETag) for an
	// assignment that takes the global batch whole (not the plain cut):
	// its ranks' assignment is memoised under it.
	global string
	// asked and askedJob are the source and job the batch was asked
	// under (Asked).
	asked    *Source
	askedJob api.Job
}

// Asked returns the source and job the batch was asked under: the job's
// as resolved, with the newest edit of its chain. A batch before an
// edit's step is laid out under an older edit (Source and Job say which),
// but the job it belongs to is the edited one: the rank's next batch is
// laid out under Asked, so that a batch made ahead names the epoch's
// extent (Batches, EpochSamples) and the samples the edited job serves.
func (b *Batch) Asked() (Source, api.Job) {
	if b.asked == nil {
		return b.Source, b.Job
	}
	return *b.asked, b.askedJob
}

// A Content is what a batch serves when it is not the samples it reads,
// one kind per Unit: a token job's sequences packed from the documents it
// reads (*TokenBatch), a clip job's clips decoded from the GOPs it reads
// (*ClipBatch). The stages after the layout ask any content what they
// need of every batch; only the stage that makes its bytes (the pack
// stage, the clip stage) takes its kind.
type Content interface {
	// Served is the number of samples the batch serves, or -1 if it
	// serves those it reads (a bucket job's images, each through its
	// bucket's pipeline).
	Served() int
	// Size is the tar body's bytes, end of archive excluded, and
	// whether they are known before any chunk is read.
	Size() (int64, bool)
	// Components is each served sample's mixture component; nil where
	// the unit is of one dataset's.
	Components() []int
}

// Part is what a batch reads of one stream's epoch: a job's epoch of one
// dataset, or a mixture component's pass.
type Part struct {
	// Comp is the mixture component the part reads (0 for one dataset).
	Comp int
	// Stream and Epoch are the stream the part's samples come from and its
	// epoch there (a component's pass); the use table follows the stream.
	Stream  Stream
	Epoch   uint64
	Samples Samples
	// First and End are the extent, in that epoch's order, of the part's
	// positions: the use table follows the stream there.
	First, End int
	// Drawn is how far before First the part's samples may lie: a rank's
	// share of its global batch by locality or balance= is drawn from
	// the whole global batch, which begins Drawn positions before its
	// plain cut's First; 0 for a plain cut. The use table counts the
	// chunks from there needed while the part is read (usetable.Table.Begin).
	Drawn int
	// Share is the stream's share of the job's global batch, in samples:
	// what the use table's clock counts its progress per batch by.
	Share int
	// EpochLen is the positions of the stream's epoch First and End
	// count: its dataset's samples, or a clip stream's clips.
	EpochLen int
}

// Take is one served sample: its part and its position in the part's
// Samples.
type Take struct{ Part, At int }

// Len is the number of samples the batch serves: a token job's
// sequences.
func (b *Batch) Len() int {
	if b.Content != nil {
		if n := b.Content.Served(); n >= 0 {
			return n
		}
	}
	return len(b.Take)
}

// Reads is the number of samples the batch reads: Len, but for a token
// job, whose sequences are packed from the documents it reads, and a
// clip job, whose clips are decoded from the GOPs it reads.
func (b *Batch) Reads() int { return len(b.Take) }

// Bytes is the batch's samples' tar bytes.
func (b *Batch) Bytes() int64 {
	var n int64
	for _, p := range b.Parts {
		n += p.Samples.Bytes
	}
	return n
}

// Sized reports whether the batch's length is known before any chunk is
// read: not when a part reads a dataset served in place, whose samples
// are sized when their chunk is decoded (Bytes and Length count none of
// them).
func (b *Batch) Sized() bool {
	if b.Content != nil {
		_, sized := b.Content.Size()
		return sized
	}
	for _, p := range b.Parts {
		if p.Samples.DS.Index.Deferred() {
			return false
		}
	}
	return true
}

// Length is the batch's tar body: its samples and the end-of-archive
// blocks (see Sized).
func (b *Batch) Length() int64 {
	if b.Content != nil {
		n, _ := b.Content.Size()
		return n + int64(len(chunkindex.EndOfArchive))
	}
	return b.Bytes() + int64(len(chunkindex.EndOfArchive))
}

// Sample is the index entry of the batch's i-th sample, with its ID and
// dataset.
func (b *Batch) Sample(i int) (ds *catalog.Dataset, id int, in chunkindex.Sample) {
	t := b.Take[i]
	s := b.Parts[t.Part].Samples
	return s.DS, s.IDs[t.At], s.Info[t.At]
}

// Components returns each served sample's mixture component, in order.
func (b *Batch) Components() []int {
	if b.Content != nil {
		if c := b.Content.Components(); c != nil {
			return c
		}
		return make([]int, b.Len())
	}
	c := make([]int, len(b.Take))
	for i, t := range b.Take {
		c[i] = b.Parts[t.Part].Comp
	}
	return c
}

// Turns reports whether the batch takes its job's turn when the jobs'
// windows do not fit in the cache together (internal/cache/usetable/turn.go).
// A composite's (a mixture's) does not: its batch needs every
// component's window at once, so its components cannot take turns with
// each other — each would wait for the other's turn to end. Like a
// peer's stream, a mixture's components are counted in what holds the
// cache and never held back.
func (b *Batch) Turns() bool { return b.Composite() == nil }

// For returns b, a batch laid out before its request (made ahead), as
// the batch asked, a batch of the same ETag laid out for the request:
// the same samples and bytes, and the epoch's extent (Batches,
// EpochSamples) and the job as the request resolved them. A named job
// edited after b was laid out, from a step after b's, keeps b's samples
// and ETag, but its epoch has the edit's counts.
func (b *Batch) For(asked *Batch) *Batch {
	nb := *b
	nb.Batches, nb.EpochSamples = asked.Batches, asked.EpochSamples
	nb.asked, nb.askedJob = asked.asked, asked.askedJob
	return &nb
}

// Without returns the batch served without the samples at batch positions
// missing (ascending): their chunk is damaged at rest. Its ETag differs
// from every full batch's, and from the same batch missing other samples.
func (b *Batch) Without(missing []int) *Batch {
	if len(missing) == 0 {
		return b
	}
	nb := *b
	nb.Missing = missing
	nb.MissingKeys = make([]string, len(missing))
	gone := make([]bool, len(b.Take))
	for i, pos := range missing {
		gone[pos] = true
		_, _, in := b.Sample(pos)
		nb.MissingKeys[i] = in.Key
	}
	keep := make([][]int, len(b.Parts)) // per part: the positions kept
	nb.Take = make([]Take, 0, len(b.Take)-len(missing))
	for i, t := range b.Take {
		if !gone[i] {
			nb.Take = append(nb.Take, Take{Part: t.Part, At: len(keep[t.Part])})
			keep[t.Part] = append(keep[t.Part], t.At)
		}
	}
	nb.Parts = make([]Part, len(b.Parts))
	for p, part := range b.Parts {
		part.Samples = part.Samples.Pick(keep[p])
		nb.Parts[p] = part
	}
	return nb.Partial(b.Content, nb.Missing, nb.MissingKeys)
}

// Extent returns the number of batches of an epoch of a job over a source
// and the epoch's length in its unit's items.
func (o *Orders) Extent(src Source, job api.Job, epoch uint64) (batches, samples int, err error) {
	src, job = o.base.edits.under(src, job, epoch, -1)
	un, err := o.units.unit(src, job)
	if err != nil {
		return 0, 0, err
	}
	return o.batches(un, src, job, epoch)
}

// batches returns the number of batches of an epoch of job over src, read
// by unit un, and the epoch's extent in un's items.
func (o *Orders) batches(un Unit, src Source, job api.Job, epoch uint64) (batches, n int, err error) {
	if n, err = un.Extent(src, job, epoch); err != nil {
		return 0, 0, err
	}
	if job.Offset > n {
		return 0, n, fmt.Errorf("%w: offset %d is past the end of epoch %d, which has %d samples", ErrOutOfRange, job.Offset, epoch, n)
	}
	return job.NumBatches(n), n, nil
}

// extent is the extent of an epoch of job over src, in its unit's items:
// what an edit's step is counted in (Edits).
func (o *Orders) extent(src Source, job api.Job, epoch uint64) (int, error) {
	un, err := o.units.unit(src, job)
	if err != nil {
		return 0, err
	}
	_, n, err := o.batches(un, src, job, epoch)
	return n, err
}

// passStep is the step of its epoch's pass batch m of job over src is,
// for a unit that cuts its epochs at steps (StepCutter).
func (o *Orders) passStep(src Source, job api.Job, epoch, m uint64) (int, bool) {
	un, err := o.units.unit(src, job)
	if err != nil {
		return 0, false
	}
	c, ok := As[StepCutter](un)
	if !ok {
		return 0, false
	}
	k, err := c.PassStep(src, job, epoch, m)
	return k, err == nil
}

// Layout lays out batch m of an epoch of a job over a source. On a node
// whose index holds only its own chunks' tables, it reads the tables of
// the batch's other chunks (see NewSamples).
func (o *Orders) Layout(ctx context.Context, src Source, job api.Job, epoch, m uint64) (*Batch, error) {
	// A batch is laid out under the newest edit that changes it, over
	// the version the chain up to it grew the job to (under); the
	// epoch's extent is the job's.
	asked, askedJob := src, job
	over, overJob := o.base.edits.under(src, job, epoch, int64(m))
	src, job = o.base.edits.under(src, job, epoch, -1)
	un, err := o.units.unit(src, job)
	if err != nil {
		return nil, err
	}
	batches, n, err := o.batches(un, src, job, epoch)
	if err != nil {
		return nil, err
	}
	if batches == 0 {
		return nil, fmt.Errorf("%w: epoch %d of %s has no batches: %d samples from offset %d with batch_size=%d world=%d drop_last=%t",
			ErrOutOfRange, epoch, src.Name(), n, job.Offset, job.BatchSize, job.World, job.DropLast)
	}
	if m >= uint64(batches) {
		return nil, fmt.Errorf("%w: batch %d out of range: valid batch numbers are 0..%d (epoch %d of %s has %d batches for batch_size=%d world=%d drop_last=%t offset=%d)",
			ErrOutOfRange, m, batches-1, epoch, src.Name(), batches, job.BatchSize, job.World, job.DropLast, job.Offset)
	}
	if over.DS != src.DS || overJob.Edit != job.Edit {
		src, job = over, overJob
	}
	src.Unit = un
	start, end, err := job.BatchRange(n, int(m))
	if err != nil {
		return nil, err
	}
	b := &Batch{Source: src, Job: job, Epoch: epoch, Batch: m, Batches: batches, EpochSamples: n, Start: start, End: end,
		asked: &asked, askedJob: askedJob}
	b.ETag = o.ETag(src, job, epoch, m)
	if src.assignment(job) != plainCut {
		r0 := job
		r0.Rank = 0
		b.global = o.ETag(src, r0, epoch, m)
	}
	return b, un.Lay(ctx, b)
}

// ETag is the ETag of batch m of an epoch of a job over a source, known
// without laying the batch out.
func (o *Orders) ETag(src Source, job api.Job, epoch, m uint64) string {
	un, err := o.units.unit(src, job)
	if t, ok := un.(Tagger); ok {
		return t.ETag(src, job, epoch, m)
	}
	// Its samples are those of the edit it is laid out under, over the
	// version the chain up to it grew the job to.
	edits := o.base.edits
	src = edits.withEdit(src, job)
	e := edits.inForce(src, job, epoch, int64(m))
	id := grownTo(src.Edit, e, src.DS)
	src, job = src.upTo(e, job)
	var key []byte
	if err == nil {
		key = un.AppendKey(nil, job)
	}
	return batchETag(id, key, src.DS, job, e, epoch, m, src.assignedUnder(job))
}

// batchETag names a batch's bytes: its index version id and every
// parameter that selects the batch, its unit's among them (Unit.AppendKey),
// and the edit e it is laid out under (nil: none), by its kind and
// version. A batch from offset 0 keeps the ETag it had before offsets
// existed, so that caches in front of a gateway stay warm across the
// upgrade.
//
// members is the membership version the batch was assigned to its rank
// under, "" for a plain cut (Source.Assigns): only then does the cluster
// change the batch, and the ETag names it. So is an importance snapshot
// an epoch is drawn from, and a pipeline the batch's images go through.
func batchETag(id string, unitKey []byte, ds *catalog.Dataset, job api.Job, e *Edit, epoch, m uint64, members string) string {
	// "brand-batch-v1|id|name|seed|window|batch_size|world|rank|drop_last|epoch|m",
	// appended field by field, as fmt.Appendf wrote it, without its
	// reflection on a path every batch takes.
	s := make([]byte, 0, 160)
	s = append(s, "brand-batch-v1|"...)
	s = append(append(s, id...), '|')
	s = append(append(s, ds.Name...), '|')
	s = append(strconv.AppendUint(s, job.Seed, 10), '|')
	for _, n := range [...]int{job.Window, job.BatchSize, job.World, job.Rank} {
		s = append(strconv.AppendInt(s, int64(n), 10), '|')
	}
	s = append(strconv.AppendBool(s, job.DropLast), '|')
	s = append(strconv.AppendUint(s, epoch, 10), '|')
	s = strconv.AppendUint(s, m, 10)
	if job.Offset != 0 {
		s = fmt.Appendf(s, "|offset=%d", job.Offset)
	}
	if members != "" {
		s = fmt.Appendf(s, "|members=%s", members)
	}
	if imp := job.Importance; imp.Version != "" {
		s = fmt.Appendf(s, "|importance=%s|%s|%d", imp.Job, imp.Version, imp.Hot)
	}
	if sel := ds.Selected(); sel != "" {
		s = fmt.Appendf(s, "|columns=%s", sel)
	}
	s = AppendTransform(s, job)
	s = append(s, unitKey...)
	s = AppendBalance(s, job)
	if e != nil {
		s = fmt.Appendf(s, "|%s=%s", e.Kind(), e.Version)
	}
	h := sha256.Sum256(s)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}

// AppendBalance names, in a balanced job's batch ETag, the cost its
// ranks are weighed by.
func AppendBalance(s []byte, job api.Job) []byte {
	if job.Balance == "" {
		return s
	}
	return fmt.Appendf(s, "|balance=%s", job.Balance)
}

// AppendTransform names, in a batch's ETag, the pipeline its images go
// through and the pipeline's fingerprint on the server (its definition,
// decoder and pixel bound): a server whose configuration changes a
// pipeline serves its batches under other ETags. A batch of the bytes as
// stored names none, and keeps the ETag it had before pipelines existed.
func AppendTransform(s []byte, job api.Job) []byte {
	if job.Transform == "" {
		return s
	}
	return fmt.Appendf(s, "|transform=%s|%s", job.Transform, job.TransformFingerprint)
}

// partialETag names a batch whose full ETag is full, served without the
// samples at batch positions missing (ascending).
func partialETag(full string, missing []int) string {
	s := []byte("brand-partial-v2|" + full)
	for _, pos := range missing {
		s = strconv.AppendInt(append(s, '|'), int64(pos), 10)
	}
	h := sha256.Sum256(s)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}

// Info describes an epoch of a job over a source: its extent, and its
// unit's figures (a mixture's components among them).
func (o *Orders) Info(src Source, job api.Job, epoch uint64) (api.EpochInfo, error) {
	src, job = o.base.edits.under(src, job, epoch, -1)
	info := api.EpochInfo{Dataset: src.Name(), Epoch: int(epoch), BatchSize: job.BatchSize, World: job.World, Rank: job.Rank,
		Window: job.Window, Seed: job.Seed, DropLast: job.DropLast, Offset: job.Offset}
	un, err := o.units.unit(src, job)
	if err != nil {
		return info, err
	}
	batches, n, err := o.batches(un, src, job, epoch)
	if err != nil {
		return info, err
	}
	info.Samples, info.Batches = n, batches
	if src.DS != nil {
		e, err := o.base.epoch(StreamOf(src.DS, job), epoch)
		if err != nil {
			return info, err
		}
		info.IndexID, info.Chunks, info.Windows = src.IndexID(), src.DS.Index.NumChunks(), e.NumWindows()
	}
	if err := un.Describe(&info, src, job, epoch); err != nil {
		return info, err
	}
	info.RankSamples = job.RankSamples(info.Samples)
	return info, nil
}
