// Package handover is what a node of a cluster does when its membership
// changes: it loads the chunks it gains that the jobs need soon, before
// the cluster moves to the new membership, from their old owner's cache
// where the old owner holds them and from the store where it does not.
//
// # Why
//
// Ownership is rendezvous hashing over the members (cluster.Membership),
// so a member joining or leaving moves about 1/N of the chunks, and only
// to or from it. A node that starts owning a chunk cold reads it from
// the store on the first batch that needs it: every job waits on it, and
// the store reads the chunk a second time although the old owner's cache
// holds it. The jobs' orders are known, so the chunks they need next are
// known too, and only those need to move before the change; the rest
// move as the jobs reach them, read by their new owner once.
//
// # How
//
// Warm runs on each node whose member list changes from membership A to
// B (its membership.Warmer), before the node reports B:
//
//  1. which chunks it gains: cluster.Moves(A, B), per dataset;
//  2. which of them are needed soon: the node's own use table and that of
//     every live member of A, asked over the peer protocol (NeededPath),
//     answer from the streams they follow (usetable.Table.Soon: the
//     current window and the next Ahead ones). The owners of A follow
//     every stream that reads their chunks, so the old owner of a chunk
//     knows every job that needs it;
//  3. each such chunk is loaded into this node's cache through the one
//     loader (catalog.Loader): from its disk tier if it kept the chunk,
//     else from the cache of a live member of A that holds it — its old
//     owner's if it does (ChunkPath; a node answers 404 rather than read
//     the store for another node) — verified against the index, else
//     from the store;
//  4. then the other chunks it gains that a live member's cache holds,
//     copied from it the same way: the jobs reach them later, and their
//     new owner then does not read them from the store again. Which
//     caches hold which gains is asked of every live member of A (with
//     held=true), not of the old owners alone: a chunk an earlier change
//     left to the batches may never have reached its old owner (a join
//     moved it from a to b, which had yet to read it when it left and the
//     chunk moved on), while the member that read it before still holds
//     it. Those no cache holds are left to the batches;
//  5. and those, when a batch first needs one, are asked of their old
//     owner once more (Sources.Read) before the store: until the cluster
//     flips, the old owner still reads the chunks it owns for the jobs, so
//     it may hold one now that it did not hold in step 4. Each old owner
//     is told which (Peers.Keep, before this node reports B, and again
//     when the list changes) and keeps its copies of them, keyed as its
//     own chunks, until asked (Kept): after the flip a copy is no longer
//     one of its chunks, which go first, and its own next warm-up (a leave
//     soon after) would evict it before this node asked. A later change
//     (a join, then a leave within the epoch, before the jobs reach them)
//     keeps them while this node reads them: those that stay its own,
//     and, until the cluster flips to the later change, those it loses
//     in it, which it still reads for the jobs meanwhile. Those that stay
//     its own whose old owner is the node leaving are copied from that
//     node in the warm-up, after its own gains, while it still serves; a
//     batch that needs one before it is copied asks that node too.
//
// Loads evict only chunks no stream needs (Config.Admit) and stop at the
// cache's capacity; the flip timeout bounds them all, the soon-needed
// first.
//
// Warm tells the node's peers it is loading (the loading callback, which
// sets State.Warming): they do not read its chunks from it under B, nor
// report B, until it is done, bounded by the flip timeout (package membership).
//
// # Concurrency
//
// A Handover is safe for concurrent use: Warm runs on the peer set's
// tracked goroutine, Read on the cache's loads.
package handover

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
)

// Peers is what a hand-over asks of the other nodes (transport.Nodes and its Asks).
type Peers interface {
	// IsUp reports whether the node at url is up, as its probes say.
	IsUp(url string) bool
	// Needed asks the node at url which of chunks its followed streams
	// need within ahead windows past their current one.
	Needed(ctx context.Context, url string, ds *catalog.Dataset, chunks []int, ahead int) ([]int, error)
	// Held asks the node at url which of chunks its cache holds.
	Held(ctx context.Context, url string, ds *catalog.Dataset, chunks []int) ([]int, error)
	// Keep tells the node at url which chunks of ds this node will ask
	// it for when a batch first needs them (its Kept), replacing what it
	// told it before.
	Keep(ctx context.Context, url string, ds *catalog.Dataset, chunks []int) error
}

// ChunkFetcher fills buf with chunk c from the cache of the node at url,
// and says whether that node is up (transport.Asks and Nodes).
type ChunkFetcher interface {
	FetchChunk(ctx context.Context, url string, ds *catalog.Dataset, c int, buf []byte) error
	IsUp(url string) bool
}

// UseTable tells which chunks this node's followed streams need soon
// (usetable.Table).
type UseTable interface {
	Soon(ds *catalog.Dataset, chunks []int, ahead int) []int
}

// Cache is where the chunks go (chunkcache.Cache).
type Cache interface {
	Contains(k chunkcache.Key) bool
	Prefetch(ctx context.Context, r chunkcache.Request, admit func(victim chunkcache.Key) bool) (chunkcache.PrefetchResult, error)
	Capacity() int64
}

// Config configures a Handover.
type Config struct {
	// Self is this node's URL as the members are listed.
	Self     string
	Peers    Peers
	UseTable UseTable
	Cache    Cache
	// Sources is the loader's source of handed-over chunks: Warm names
	// each chunk's old owner there before it loads the chunk.
	Sources *Sources
	// Datasets returns the datasets served now; it fails until they are
	// loaded (catalog.Catalog.All), and Warm waits for them.
	Datasets func() ([]*catalog.Dataset, error)
	// Admit says whether a load for the hand-over may evict a chunk:
	// only chunks no stream needs.
	Admit func(victim chunkcache.Key) bool
	// PrefetchWindows is how many windows past their current one the streams'
	// needs are counted (the prefetch's windows).
	PrefetchWindows int
	// Workers bounds the chunks loaded at once; default 4.
	Workers int
	Log     zerolog.Logger
}

// Handover loads the chunks a node gains in a membership change
// (package doc).
type Handover struct {
	cfg Config
}

// New returns a Handover.
func New(c Config) *Handover {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	return &Handover{cfg: c}
}

// Sources is the loader's source of the chunks being handed over
// (catalog.Handover): their old owners, named by Warm before it loads
// each. It is built before the cache, whose loader reads through it.
type Sources struct {
	peers ChunkFetcher
	log   zerolog.Logger

	mu sync.Mutex
	// from is, per chunk being handed over, its old owner; given marks
	// those the old owner gave.
	from  map[chunkcache.Key]source
	given map[chunkcache.Key]bool
	// later is, per chunk the last change gave this node that Warm did
	// not load, its old owner: asked once, when a batch first needs the
	// chunk, before the store (package doc, step 5).
	later map[chunkcache.Key]source
	// told is, per old owner and dataset version, the chunks of later
	// it was last told this node awaits from it (tell).
	told map[string]map[*catalog.Dataset][]int
}

// source is a chunk's old owner.
type source struct {
	url string
	ds  *catalog.Dataset
	c   int
}

// NewSources returns the source of handed-over chunks, which it asks of
// their old owners through peers.
func NewSources(peers ChunkFetcher, log zerolog.Logger) *Sources {
	return &Sources{peers: peers, log: log, from: map[chunkcache.Key]source{}, given: map[chunkcache.Key]bool{},
		later: map[chunkcache.Key]source{}, told: map[string]map[*catalog.Dataset][]int{}}
}

// owed returns what each old owner is to be told this node awaits from
// it (Kept) where that differs from what it was told last: per old owner
// and dataset version, the chunks of later it gave this node, empty for
// those it was told of before and no longer is; and the told to record
// once they have been told.
func (s *Sources) owed() (tell map[string]map[*catalog.Dataset][]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := map[string]map[*catalog.Dataset][]int{}
	for _, src := range s.later {
		if now[src.url] == nil {
			now[src.url] = map[*catalog.Dataset][]int{}
		}
		now[src.url][src.ds] = append(now[src.url][src.ds], src.c)
	}
	tell = map[string]map[*catalog.Dataset][]int{}
	add := func(url string, ds *catalog.Dataset, cs []int) {
		if tell[url] == nil {
			tell[url] = map[*catalog.Dataset][]int{}
		}
		tell[url][ds] = cs
	}
	for url, byDS := range now {
		for ds, cs := range byDS {
			slices.Sort(cs)
			if !slices.Equal(cs, s.told[url][ds]) {
				add(url, ds, cs)
			}
		}
	}
	for url, byDS := range s.told {
		for ds := range byDS {
			if _, ok := now[url][ds]; !ok {
				add(url, ds, nil)
			}
		}
	}
	return tell
}

// toldOf records that the old owner at url was told this node awaits
// chunks of ds from it (none: nothing).
func (s *Sources) toldOf(url string, ds *catalog.Dataset, chunks []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(chunks) == 0 {
		delete(s.told[url], ds)
		if len(s.told[url]) == 0 {
			delete(s.told, url)
		}
		return
	}
	if s.told[url] == nil {
		s.told[url] = map[*catalog.Dataset][]int{}
	}
	s.told[url][ds] = chunks
}

// keep drops the old owners named for the batches (askLater) of the
// chunks this node reads neither before nor after a new change (before
// and after say which it reads). The others stay: until the cluster
// flips, this node still reads the chunks it owns before the change for
// the jobs, whether or not it keeps them (a joiner, or a node leaving, in
// a leave within the epoch a join began: a batch that needs one asks its
// old owner, who holds it, rather than read the store); and a change that
// follows another before the jobs have reached its gains (a join, then a
// leave within the epoch) leaves those it keeps this node's, and their
// old owner still holds them — unless it is the node leaving (stays says
// no): those are returned for Warm to copy before it goes, and stay left
// to the batches until Warm has loaded them (loaded): a batch that needs
// one meanwhile asks the node leaving, which still serves, rather than
// read the store.
func (s *Sources) keep(before, after func(ds *catalog.Dataset, c int) bool, stays func(url string) bool) (leaving []source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, src := range s.later {
		switch {
		case after(src.ds, src.c) && !stays(src.url):
			leaving = append(leaving, src)
		case after(src.ds, src.c) || before(src.ds, src.c):
		default:
			delete(s.later, k)
		}
	}
	return leaving
}

// loaded forgets the old owner named for the batches of a chunk Warm has
// made resident.
func (s *Sources) loaded(k chunkcache.Key) {
	s.mu.Lock()
	delete(s.later, k)
	s.mu.Unlock()
}

// askLater names the old owner of chunk c of ds, which this node gains
// and Warm does not load, for the first batch that needs it.
func (s *Sources) askLater(ds *catalog.Dataset, c int, url string) {
	s.mu.Lock()
	s.later[ds.ChunkKey(c)] = source{url: url, ds: ds, c: c}
	s.mu.Unlock()
}

// expect names the old owner of chunk c of ds until the returned func is
// called; given then reports whether the old owner gave it.
func (s *Sources) expect(ds *catalog.Dataset, c int, url string) (k chunkcache.Key, done func() (given bool)) {
	k = ds.ChunkKey(c)
	s.mu.Lock()
	s.from[k] = source{url: url, ds: ds, c: c}
	s.mu.Unlock()
	return k, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		given := s.given[k]
		delete(s.from, k)
		delete(s.given, k)
		return given
	}
}

// task is one chunk to load, and its old owner ("" none to ask).
type task struct {
	ds  *catalog.Dataset
	c   int
	old string
}

// Warm loads the chunks this node gains going from membership from to
// membership to that the jobs need soon (package doc), and says what it
// loaded and from where. It implements transport.Warm.
func (h *Handover) Warm(ctx context.Context, from, to *cluster.Membership, loading func()) (api.MembershipChange, error) {
	var change api.MembershipChange
	datasets, err := h.datasets(ctx)
	if err != nil {
		return change, err
	}
	leaving := h.cfg.Sources.keep(h.reads(datasets, from), h.reads(datasets, to),
		func(url string) bool { return slices.Contains(to.Members(), url) })
	var tasks []task
	for _, ds := range datasets {
		tasks = append(tasks, h.plan(ctx, ds, from, to)...)
	}
	// Then the gains an earlier change left to the batches whose old
	// owner leaves in this one: copied from it while it still serves, or
	// from another member whose cache holds them if it does not.
	byDS := map[*catalog.Dataset][]source{}
	var order []*catalog.Dataset
	for _, src := range leaving {
		if h.cfg.Cache.Contains(src.ds.ChunkKey(src.c)) {
			continue
		}
		if _, ok := byDS[src.ds]; !ok {
			order = append(order, src.ds)
		}
		byDS[src.ds] = append(byDS[src.ds], src)
	}
	for _, ds := range order {
		srcs := byDS[ds]
		cs := make([]int, len(srcs))
		for i, src := range srcs {
			cs[i] = src.c
		}
		holders := h.holders(ctx, ds, from, cs)
		for _, src := range srcs {
			switch hs := holders[src.c]; {
			case slices.Contains(hs, src.url):
				tasks = append(tasks, task{ds: ds, c: src.c, old: src.url})
			case len(hs) > 0:
				tasks = append(tasks, task{ds: ds, c: src.c, old: hs[0]})
			case h.cfg.Peers.IsUp(src.url):
				tasks = append(tasks, task{ds: ds, c: src.c, old: src.url})
			}
		}
	}
	// The old owners keep what this node leaves to the batches until it
	// asks for them (Kept), told before this node reports the new
	// membership: once the cluster flips, their copies are no longer
	// their own chunks.
	h.tell(ctx)
	if len(tasks) == 0 {
		return change, nil
	}
	defer h.tell(ctx) // those loaded now, from another holder, are no longer awaited
	loading()
	h.cfg.Log.Info().Str("members", to.Version()).Int("chunks", len(tasks)).Msg("loading the chunks this node gains that the jobs need soon")
	budget := h.cfg.Cache.Capacity()
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan task)
	for range h.cfg.Workers {
		wg.Go(func() {
			for t := range work {
				src, n, err := h.load(ctx, t)
				if err != nil {
					if ctx.Err() == nil {
						h.cfg.Log.Warn().Err(err).Str("dataset", t.ds.Name).Int("chunk", t.c).Msg("loading a chunk gained in a membership change; it is read when a batch needs it")
					}
					continue
				}
				mu.Lock()
				switch src {
				case "peer":
					change.PeerBytes += n
				case "disk":
					change.DiskBytes += n
				case "store":
					change.StoreBytes += n
				}
				if src != "" {
					change.Chunks++
				}
				mu.Unlock()
			}
		})
	}
	var queued int64
	for _, t := range tasks {
		if queued += t.ds.Index.Chunk(t.c).Size; queued > budget {
			break // the rest is read from the store as the batches reach it
		}
		select {
		case work <- t:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	return change, ctx.Err()
}

// tell tells each old owner which chunks this node leaves to the batches
// and will ask it for (Sources.owed), where that changed since it was
// told last. An owner that cannot be told is told at the next warm-up;
// until then it may evict what this node will ask it for, which this
// node then reads from the store.
func (h *Handover) tell(ctx context.Context) {
	if ctx.Err() != nil {
		return // replaced by a newer change, whose warm-up tells them
	}
	for url, byDS := range h.cfg.Sources.owed() {
		if !h.cfg.Peers.IsUp(url) {
			continue
		}
		for ds, cs := range byDS {
			if err := h.cfg.Peers.Keep(ctx, url, ds, cs); err != nil {
				h.cfg.Log.Info().Err(err).Str("peer", url).Int("chunks", len(cs)).
					Msg("telling a chunk's old owner which of its chunks this node will ask it for")
				continue
			}
			h.cfg.Sources.toldOf(url, ds, cs)
		}
	}
}

// reads returns whether this node owns chunk c of ds under m, one of
// datasets: whether it reads the chunk for the jobs while the cluster
// agrees on m.
func (h *Handover) reads(datasets []*catalog.Dataset, m *cluster.Membership) func(ds *catalog.Dataset, c int) bool {
	self := m.Index(h.cfg.Self)
	return func(ds *catalog.Dataset, c int) bool {
		return self >= 0 && slices.Contains(datasets, ds) && ds.Owners(m)[c] == self
	}
}

// datasets waits for the datasets to be loaded.
func (h *Handover) datasets(ctx context.Context) ([]*catalog.Dataset, error) {
	for {
		ds, err := h.cfg.Datasets()
		if err == nil {
			return ds, nil
		}
		if !errors.Is(err, catalog.ErrNotReady) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// plan lists the chunks of ds this node gains from from to to that some
// stream needs soon, by this node's use table or a live member of from's,
// each with the live node to copy it from (holder) or its old owner if
// no cache holds it; then the other chunks it gains that a live member's
// cache holds.
func (h *Handover) plan(ctx context.Context, ds *catalog.Dataset, from, to *cluster.Membership) []task {
	gained, _ := cluster.Moves(ds.ClusterKey(), ds.Counts, from, to, h.cfg.Self)
	if len(gained) == 0 {
		return nil
	}
	needed := map[int]bool{}
	for _, c := range h.cfg.UseTable.Soon(ds, gained, h.cfg.PrefetchWindows) {
		needed[c] = true
	}
	for _, u := range from.Members() {
		if u == h.cfg.Self || !h.cfg.Peers.IsUp(u) {
			continue
		}
		cs, err := h.cfg.Peers.Needed(ctx, u, ds, gained, h.cfg.PrefetchWindows)
		if err != nil {
			h.cfg.Log.Info().Err(err).Str("peer", u).Msg("asking a peer which chunks its jobs need soon")
			continue
		}
		for _, c := range cs {
			needed[c] = true
		}
	}
	owners := ds.Owners(from)
	oldOf := func(c int) string {
		if old := from.Members()[owners[c]]; old != h.cfg.Self && h.cfg.Peers.IsUp(old) {
			return old
		}
		return ""
	}
	var want []int // the gains this node's cache lacks
	for _, c := range gained {
		if !h.cfg.Cache.Contains(ds.ChunkKey(c)) {
			want = append(want, c)
		}
	}
	holders := h.holders(ctx, ds, from, want)
	// holder is the node to copy chunk c from: its old owner if its
	// cache holds c, else another live member's that does, else "".
	holder := func(c int) string {
		if old := oldOf(c); old != "" && slices.Contains(holders[c], old) {
			return old
		}
		if len(holders[c]) > 0 {
			return holders[c][0]
		}
		return ""
	}
	var tasks, rest []task
	for _, c := range want {
		switch src := holder(c); {
		case needed[c] && src != "":
			tasks = append(tasks, task{ds: ds, c: c, old: src})
		case needed[c]:
			// No cache holds it yet: its old owner is asked when it is
			// loaded (it still reads it for the jobs), then the store.
			tasks = append(tasks, task{ds: ds, c: c, old: oldOf(c)})
		case src != "":
			// Copied now, it is not read from the store again when the
			// jobs reach it.
			rest = append(rest, task{ds: ds, c: c, old: src})
		case oldOf(c) != "":
			h.cfg.Sources.askLater(ds, c, oldOf(c))
		}
	}
	return append(tasks, rest...)
}

// holders asks each live member of from but this node which of chunks
// its cache holds, and returns, per chunk, those that hold it, in from's
// order. Not only a chunk's old owner is asked: a chunk an earlier
// change left to the batches may have never reached its old owner (a
// join moved it from a to b, b had yet to read it, and now b leaves and
// the chunk moves on to this node), while the member that read it before
// still holds it; and a node that read a down owner's chunks holds them
// too.
func (h *Handover) holders(ctx context.Context, ds *catalog.Dataset, from *cluster.Membership, chunks []int) map[int][]string {
	out := map[int][]string{}
	if len(chunks) == 0 {
		return out
	}
	for _, u := range from.Members() {
		if u == h.cfg.Self || !h.cfg.Peers.IsUp(u) {
			continue
		}
		held, err := h.cfg.Peers.Held(ctx, u, ds, chunks)
		if err != nil {
			h.cfg.Log.Info().Err(err).Str("peer", u).Msg("asking a peer which chunks its cache holds")
			continue
		}
		for _, c := range held {
			out[c] = append(out[c], u)
		}
	}
	return out
}

// load makes chunk t resident, asking its old owner first, and says where
// its bytes came from ("" if it was resident already or found no room)
// and how many.
func (h *Handover) load(ctx context.Context, t task) (string, int64, error) {
	r := t.ds.ChunkRequest(t.c)
	given := func() bool { return false }
	if t.old != "" {
		_, given = h.cfg.Sources.expect(t.ds, t.c, t.old)
	}
	res, err := h.cfg.Cache.Prefetch(ctx, r, h.cfg.Admit)
	fromPeer := given()
	if err != nil {
		return "", 0, err
	}
	if res != chunkcache.PrefetchRejected {
		h.cfg.Sources.loaded(r.Key)
	}
	switch res {
	case chunkcache.PrefetchLoadedBelow:
		return "disk", r.Size, nil
	case chunkcache.PrefetchLoaded:
		if fromPeer {
			return "peer", r.Size, nil
		}
		return "store", r.Size, nil
	}
	return "", 0, nil
}

// Read implements catalog.Handover: a chunk being handed over is asked of
// its old owner's cache and verified; false (read the store) if it is not
// being handed over, the old owner does not hold it, or its bytes fail.
func (s *Sources) Read(ctx context.Context, k chunkcache.Key, buf []byte, verify func([]byte) error) bool {
	s.mu.Lock()
	src, ok := s.from[k]
	later := false
	if !ok {
		// A chunk of the last change Warm left to the batches: its old
		// owner is asked this once, if it is up.
		src, later = s.later[k]
		delete(s.later, k)
	}
	s.mu.Unlock()
	if !ok && !(later && s.peers.IsUp(src.url)) {
		return false
	}
	if err := s.peers.FetchChunk(ctx, src.url, src.ds, src.c, buf); err != nil {
		// Not holding it is the old owner's ordinary answer; any other
		// failure (no answer in time, a refusal) costs a store read this
		// node was told to avoid, and says so.
		ev := s.log.Warn()
		if errors.Is(err, transport.ErrNotHeld) {
			ev = s.log.Debug()
		}
		ev.Err(err).Str("peer", src.url).Str("chunk", k.String()).Msg("a chunk's old owner did not give it; reading the store")
		return false
	}
	if err := verify(buf); err != nil {
		s.log.Warn().Err(err).Str("peer", src.url).Str("chunk", k.String()).Msg("a chunk from its old owner failed its check; reading the store")
		return false
	}
	if ok {
		s.mu.Lock()
		s.given[k] = true
		s.mu.Unlock()
	}
	return true
}
