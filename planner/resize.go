package planner

import (
	"fmt"
	"io"
	"slices"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/cluster"
)

// ResizeInput is a resize of a cluster to plan: the membership before and
// after, and the job whose next windows the nodes gaining chunks load
// before the change (internal/cluster/handover), at the start of its epoch
// Job.FirstEpoch.
type ResizeInput struct {
	Dataset  Dataset
	IndexKey uint64
	Job      Job
	From, To *cluster.Membership
	// PrefetchWindows is the windows past the current one the hand-over loads (the
	// prefetch windows).
	PrefetchWindows int
	// NodeCacheBytes is each node's cache: an old owner holds the chunks
	// the job needs next if its share of the dataset fits in it (its
	// cache keeps what is needed soonest, and an epoch has read them).
	NodeCacheBytes int64
	// StoreBytesPerSec and PeerBytesPerSec are the bandwidths one node
	// reads at from the store and from another node.
	StoreBytesPerSec, PeerBytesPerSec float64
}

// ResizePlan is what a resize costs: the chunks whose owner changes, those
// of them the job needs in its next windows (loaded before the change),
// where their bytes come from, and how long the slowest gaining node takes
// to load its part at the given bandwidths. When the old owners hold
// their chunks, the other moved chunks are copied from their caches
// too, after the soon-needed ones (RestChunks); otherwise they are read
// by their new owners from the store as the jobs reach them, once each.
//
// The bytes of chunks (moved, soon, rest) and those from peers are what
// the caches hold and hand over: the chunks' sizes (Dataset.ChunkSizes);
// StoreBytes are what their loads read from the store: their store sizes
// (Dataset.StoreSizes), which differ for a dataset served in place.
type ResizePlan struct {
	NodesBefore   int    `json:"nodes_before"`
	NodesAfter    int    `json:"nodes_after"`
	MembersBefore string `json:"members_before"`
	MembersAfter  string `json:"members_after"`
	Chunks        int    `json:"chunks"`
	MovedChunks   int    `json:"moved_chunks"`
	MovedBytes    int64  `json:"moved_bytes"`
	SoonChunks    int    `json:"soon_chunks"`
	SoonBytes     int64  `json:"soon_bytes"`
	RestChunks    int    `json:"rest_chunks"`
	RestBytes     int64  `json:"rest_bytes"`
	// Held: the old owners hold the chunks the job needs next (the job has
	// read an epoch, and the largest owner's share fits in its cache).
	Held             bool    `json:"held"`
	PeerBytes        int64   `json:"peer_bytes"`
	StoreBytes       int64   `json:"store_bytes"`
	StoreBytesPerSec float64 `json:"store_bytes_per_sec"`
	PeerBytesPerSec  float64 `json:"peer_bytes_per_sec"`
	// WarmSeconds is the slowest gaining node's load: its peer bytes at
	// PeerBytesPerSec plus its store bytes at StoreBytesPerSec;
	// SoonSeconds the same for the soon-needed chunks alone, which are
	// loaded first.
	WarmSeconds float64 `json:"warm_seconds"`
	SoonSeconds float64 `json:"soon_seconds"`
}

// DefaultPeerBytesPerSec is the bandwidth between nodes a resize plan
// assumes: 10 Gb/s.
const DefaultPeerBytesPerSec = 1.25e9

// PlannedMembers is a membership of n nodes named as a StatefulSet names
// its pods (http://brand-K.brand:8080): what `brand plan` resizes between
// when it knows no cluster. Rendezvous ownership makes any names as good
// as these for the figures.
func PlannedMembers(n int) *cluster.Membership {
	urls := make([]string, n)
	for k := range urls {
		urls[k] = fmt.Sprintf("http://brand-%d.brand:8080", k)
	}
	m, _ := cluster.NewMembership(urls)
	return m
}

// ResizedMembers is from with n members: its members and, for a larger
// cluster, planned ones (PlannedMembers' names, past those it holds); for
// a smaller one, the first n in order.
func ResizedMembers(from *cluster.Membership, n int) *cluster.Membership {
	urls := slices.Clone(from.Members())
	if n <= len(urls) {
		m, _ := cluster.NewMembership(urls[:max(n, 1)])
		return m
	}
	for k := 0; len(urls) < n; k++ {
		if u := fmt.Sprintf("http://brand-%d.brand:8080", k); from.Index(u) < 0 {
			urls = append(urls, u)
		}
	}
	m, _ := cluster.NewMembership(urls)
	return m
}

// MakeResizePlan computes the cost of going from in.From to in.To
// (ResizePlan).
func MakeResizePlan(in ResizeInput) (*ResizePlan, error) {
	d := in.Dataset
	if err := validateDataset(d); err != nil {
		return nil, err
	}
	if in.From == nil || in.To == nil {
		return nil, fmt.Errorf("%w: a resize plan needs the memberships before and after", ErrInvalid)
	}
	if in.PeerBytesPerSec <= 0 {
		in.PeerBytesPerSec = DefaultPeerBytesPerSec
	}
	if in.StoreBytesPerSec <= 0 {
		return nil, fmt.Errorf("%w: a resize plan needs the store's bandwidth", ErrInvalid)
	}
	p := &ResizePlan{NodesBefore: in.From.Len(), NodesAfter: in.To.Len(), MembersBefore: in.From.Version(), MembersAfter: in.To.Version(),
		Chunks: len(d.ChunkSizes), StoreBytesPerSec: in.StoreBytesPerSec, PeerBytesPerSec: in.PeerBytesPerSec}
	before := in.From.Owners(in.IndexKey, d.Counts)
	after := in.To.Owners(in.IndexKey, d.Counts)
	soon, err := soonChunks(d, in.Job, in.PrefetchWindows)
	if err != nil {
		return nil, err
	}
	// Whether the old owners hold them: an epoch has been read, and the
	// largest share fits in a node's cache.
	share := make([]int64, in.From.Len())
	for c, o := range before {
		share[o] += d.ChunkSizes[c]
	}
	p.Held = in.Job.FirstEpoch > 0 && slices.Max(share) <= in.NodeCacheBytes
	stores := d.stores()
	type load struct{ soonPeer, soonStore, restPeer int64 }
	gainer := map[string]*load{}
	for c := range d.ChunkSizes {
		old, now := in.From.Members()[before[c]], in.To.Members()[after[c]]
		if old == now {
			continue
		}
		p.MovedChunks++
		p.MovedBytes += d.ChunkSizes[c]
		l := gainer[now]
		if l == nil {
			l = &load{}
			gainer[now] = l
		}
		// A chunk comes from its old owner's cache if it holds it (a node
		// leaving hands over what it holds too); a soon-needed one the old
		// owner does not hold, from the store; the others, when the jobs
		// reach them.
		size := d.ChunkSizes[c]
		switch {
		case soon[c] && p.Held:
			p.SoonChunks++
			p.SoonBytes += size
			l.soonPeer += size
		case soon[c]:
			p.SoonChunks++
			p.SoonBytes += size
			l.soonStore += stores[c]
		case p.Held:
			p.RestChunks++
			p.RestBytes += size
			l.restPeer += size
		}
	}
	for _, l := range gainer {
		p.PeerBytes += l.soonPeer + l.restPeer
		p.StoreBytes += l.soonStore
		soon := float64(l.soonPeer)/in.PeerBytesPerSec + float64(l.soonStore)/in.StoreBytesPerSec
		p.SoonSeconds = max(p.SoonSeconds, soon)
		p.WarmSeconds = max(p.WarmSeconds, soon+float64(l.restPeer)/in.PeerBytesPerSec)
	}
	return p, nil
}

// soonChunks is the chunks job needs next at the start of its epoch
// FirstEpoch: those of the current window and the prefetch windows after
// it, as the gateway's use tables name them (usetable.Table.Soon) — in
// the order the job is served under its edits, whose windows name only
// the chunks that keep a sample.
func soonChunks(d Dataset, job Job, prefetch int) (map[int]bool, error) {
	if err := validateEdits(job, len(d.Counts)); err != nil {
		return nil, err
	}
	s := &schedule{d: d, j: job}
	e, err := s.order(job.FirstEpoch, job.Window)
	if err != nil {
		return nil, err
	}
	soon := map[int]bool{}
	for w := range min(prefetch+1, e.NumWindows()) {
		for _, c := range e.WindowChunks(w) {
			soon[c] = true
		}
	}
	return soon, nil
}

// WriteText writes the plan for a reader.
func (p *ResizePlan) WriteText(w io.Writer) error {
	held := "the old owners hold them (an epoch has been read and each node's share fits its cache): they come from their caches, and so do the other moved chunks"
	rest := fmt.Sprintf("the other moved chunks, copied from the old owners' caches after them: %d (%s)", p.RestChunks, humanize.IBytes(uint64(p.RestBytes)))
	if !p.Held {
		held = "the old owners do not hold them (a first epoch, or shares larger than a node's cache): they come from the store"
		rest = "the other moved chunks are read by their new owners from the store as the jobs reach them, once each"
	}
	_, err := fmt.Fprintf(w, `Resize from %d to %d nodes (membership %s to %s)
  chunks changing owner: %d of %d (%s)
  needed by the job in its next windows, loaded before the change: %d (%s)
    %s
  %s
  from peers: %s, from the store: %s
  warm-up: %.2f s, the soon-needed chunks in %.2f s (the slowest gaining node, at %s/s from peers and %s/s from the store)
`, p.NodesBefore, p.NodesAfter, p.MembersBefore, p.MembersAfter, p.MovedChunks, p.Chunks, humanize.IBytes(uint64(p.MovedBytes)),
		p.SoonChunks, humanize.IBytes(uint64(p.SoonBytes)), held, rest, humanize.IBytes(uint64(p.PeerBytes)), humanize.IBytes(uint64(p.StoreBytes)),
		p.WarmSeconds, p.SoonSeconds, humanize.IBytes(uint64(p.PeerBytesPerSec)), humanize.IBytes(uint64(p.StoreBytesPerSec)))
	return err
}
