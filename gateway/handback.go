package gateway

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/cluster/storepath"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/stopper"
)

// A healed fault gives back what it moved, both ways.
//
// While a node holds a peer down (a fetch from it timed out, or its
// probes fail), it reads the peer's chunks from the store itself
// (route.Router.Source): it stands in for the peer. The peer, cut off
// too, never read them; once the fault heals it would read each one from
// the store again when the jobs next need it, although the node that
// stood in holds it. So, as this node's probe takes the peer back up and
// before any of its reads go to the peer again
// (transport.Config.Returning), it tells the peer which of the peer's
// chunks its cache holds (give), and asks it which of its own it holds
// (ask); the peer takes those it lacks from this node's cache (take) — named for its loader before the store
// (storepath.Returned.Given), and copied at once in the background — and
// the store reads none of them twice.
//
// And a node cut off from the store alone reads its chunks through its
// peers meanwhile; once the store answers again it asks them which of
// its chunks they hold (takeBack, storepath.Returned.Learn).

// giveBack is a node's part in it.
type giveBack struct {
	datasets func() ([]*catalog.Dataset, error)
	cache    interface {
		Contains(k chunkcache.Key) bool
		Prefetch(ctx context.Context, r chunkcache.Request, admit func(victim chunkcache.Key) bool) (chunkcache.PrefetchResult, error)
	}
	routing  *route.Router
	peers    nodeAsks
	returned *storepath.Returned
	// distance is the use table's next-use key of a chunk: the copies
	// evict only chunks no stream needs.
	distance func(chunkcache.Key) int64
	copies   *stopper.Group // runs the copies; drained before the cache
	timeout  time.Duration  // bounds a question to a peer (--peer-timeout)
	log      zerolog.Logger
}

// returning runs as this node's probe takes the node at url back up
// (transport.Config.Returning): it gives the node what this node holds
// of its chunks, and asks it for what it holds of this node's.
func (b *giveBack) returning(ctx context.Context, url string) {
	all, err := b.datasets()
	if err != nil {
		return // the datasets are not loaded yet: this node holds none of them
	}
	b.give(ctx, url, all)
	b.ask(ctx, url, all)
}

// afterFault is how long after this node reaches the store again a chunk
// of its own that its cache lacks is searched for at the peers before
// the store (storepath.Returned.AfterFault): a peer whose request this
// node refused while it could not reach the store read the chunk itself,
// maybe an instant after this node asked the peers what they hold
// (takeBack). About the epochs that follow, the time the peers' copies
// last; only a cut from the store opens it, never a start.
const afterFault = 5 * time.Minute

// give tells the node at url which of the chunks it owns this node's
// cache holds (Client.Give). An error costs only the store reads it
// would have saved, and is logged.
func (b *giveBack) give(ctx context.Context, url string, all []*catalog.Dataset) {
	k := b.peers.Slot(url)
	if k < 0 {
		return
	}
	for _, ds := range all {
		var held []int
		for c := range ds.Index.NumChunks() {
			if b.routing.Owner(ds, c) == k && b.cache.Contains(ds.ChunkKey(c)) {
				held = append(held, c)
			}
		}
		if len(held) == 0 {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, b.timeout)
		taken, err := b.peers.Give(qctx, url, ds, held)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				b.log.Info().Err(err).Str("peer", url).Str("dataset", ds.Name).Int("chunks", len(held)).
					Msg("telling a peer taken back up which of its chunks this node holds; it reads them from the store")
			}
			continue
		}
		if len(taken) > 0 {
			b.log.Info().Str("peer", url).Str("dataset", ds.Name).Int("chunks", len(taken)).
				Msg("a peer taken back up takes the chunks of its own this node read for it meanwhile")
		}
	}
}

// ask asks the node at url which of this node's own chunks it lacks the
// node's cache holds, and names it for them before the store
// (storepath.Returned.Ask): this node may have been the one cut off, and
// the node may have read them while this node held it down or could not
// reach the store; when the store answered again, this node asked only
// the peers it saw up (takeBack).
func (b *giveBack) ask(ctx context.Context, url string, all []*catalog.Dataset) {
	for _, ds := range all {
		var lack []int
		for c := range ds.Index.NumChunks() {
			if b.routing.Owns(ds, c) && !b.cache.Contains(ds.ChunkKey(c)) {
				lack = append(lack, c)
			}
		}
		b.returned.Ask(ctx, ds, lack, url)
	}
}

// take takes, of chunks of ds that the node at url says its cache holds
// (give, on that node), those this node owns and does not hold: names
// that node for them before the store (storepath.Returned.Given) and
// copies them from it in the background, evicting only chunks no stream
// needs; one that finds no room is asked of it when a batch first needs
// it. It returns the chunks taken.
func (b *giveBack) take(url string, ds *catalog.Dataset, chunks []int) []int {
	var taken []int
	for _, c := range chunks {
		if b.routing.Owns(ds, c) && !b.cache.Contains(ds.ChunkKey(c)) {
			taken = append(taken, c)
		}
	}
	if len(taken) == 0 {
		return nil
	}
	b.returned.Given(url, ds, taken)
	admit := func(victim chunkcache.Key) bool { return !usetable.Needed(b.distance(victim)) }
	b.copies.Go(func(ctx context.Context) {
		for _, c := range taken {
			if ctx.Err() != nil {
				return
			}
			if _, err := b.cache.Prefetch(ctx, ds.ChunkRequest(c), admit); err != nil && ctx.Err() == nil {
				b.log.Debug().Err(err).Str("peer", url).Int("chunk", c).Str("dataset", ds.Name).Msg("copying a chunk a peer gave back")
			}
		}
	})
	return taken
}

// takeBack names, once this node reaches the store again, which of the
// chunks it reads itself and does not hold its peers' caches hold: they
// read them for it meanwhile, and give them back before the store
// (storepath.Returned.Learn).
func (b *giveBack) takeBack(ctx context.Context) {
	b.returned.AfterFault(afterFault)
	all, err := b.datasets()
	if err != nil {
		return
	}
	var urls []string
	for _, k := range b.peers.Peers() {
		urls = append(urls, b.peers.URL(k))
	}
	for _, ds := range all {
		if !ds.Remote() {
			continue
		}
		var mine []int
		for c := range ds.Index.NumChunks() {
			if b.routing.Local(ds, c) && !b.cache.Contains(ds.ChunkKey(c)) {
				mine = append(mine, c)
			}
		}
		b.returned.Learn(ctx, ds, mine, urls)
	}
}
