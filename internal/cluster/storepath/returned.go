package storepath

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
)

// ChunkPeers is what Returned asks of the other nodes
// (transport.Asks and Nodes): which of some chunks a node's cache holds, a chunk's
// bytes from its cache, and whether it is up.
type ChunkPeers interface {
	Held(ctx context.Context, url string, ds *catalog.Dataset, chunks []int) ([]int, error)
	FetchChunk(ctx context.Context, url string, ds *catalog.Dataset, c int, buf []byte) error
	IsUp(url string) bool
}

// Returned gives back, once this node reaches the store again, the
// chunks its peers read for it while it could not: the chunks it would
// read itself that its cache does not hold and a live peer's cache does
// (Learn, asked of every peer once), each asked of that peer — once, when
// a batch first needs it — before the store (Read, a catalog.Handover),
// so that a healed cut costs no re-read of what the other nodes held.
// A chunk the peer no longer holds is read from the store.
//
// And for a while after a fault (AfterFault), an own chunk no peer was
// named for is searched for at the peers before the store (WithSearch):
// a peer may have read it after this node asked — one its request found
// this node unable to serve just before the store answered again reads
// the chunk itself, an instant after this node's question.
type Returned struct {
	peers ChunkPeers
	log   zerolog.Logger

	// The search after a fault (WithSearch): own says whether this node
	// owns a chunk, chunk which chunk a key is, others the peers' URLs.
	own    func(ds *catalog.Dataset, c int) bool
	chunk  func(k chunkcache.Key) (*catalog.Dataset, int, error)
	others func() []string

	mu    sync.Mutex
	from  map[chunkcache.Key]holder
	until time.Time // the search's end (AfterFault)
}

// holder is the peer whose cache held a chunk when this node asked, or
// that told this node it holds it (given).
type holder struct {
	url   string
	ds    *catalog.Dataset
	c     int
	given bool
}

// NewReturned returns an empty Returned asking peers.
func NewReturned(peers ChunkPeers, log zerolog.Logger) *Returned {
	return &Returned{peers: peers, log: log, from: map[chunkcache.Key]holder{}}
}

// heldBound bounds Learn's question to each peer, as a fetch's.
const heldBound = 10 * time.Second

// WithSearch makes Read search the peers, for a while after a fault
// (AfterFault), for an own chunk no peer was named for (package doc):
// own says whether this node owns a chunk, chunk which chunk a key
// names, others the other nodes' URLs. It returns r.
func (r *Returned) WithSearch(own func(ds *catalog.Dataset, c int) bool, chunk func(k chunkcache.Key) (*catalog.Dataset, int, error), others func() []string) *Returned {
	r.own, r.chunk, r.others = own, chunk, others
	return r
}

// AfterFault makes Read search the peers for own chunks no peer was
// named for until within has passed (WithSearch): a fault has just
// healed (the store answers again, a peer is taken back up), and the
// peers' caches may hold what they read while it lasted.
func (r *Returned) AfterFault(within time.Duration) {
	r.mu.Lock()
	if end := time.Now().Add(within); end.After(r.until) {
		r.until = end
	}
	r.mu.Unlock()
}

// searchBound bounds the search's question to the peers: they answer
// from memory, at once.
const searchBound = time.Second

// search asks every live peer at once whether its cache holds chunk k, an
// own chunk, and fills buf from the first that does; false if none does,
// the search is over (AfterFault) or k is not this node's.
func (r *Returned) search(ctx context.Context, k chunkcache.Key, buf []byte, verify func([]byte) error) bool {
	r.mu.Lock()
	on := time.Now().Before(r.until)
	r.mu.Unlock()
	if !on || r.own == nil {
		return false
	}
	ds, c, err := r.chunk(k)
	if err != nil || !r.own(ds, c) {
		return false
	}
	var urls []string
	for _, u := range r.others() {
		if r.peers.IsUp(u) {
			urls = append(urls, u)
		}
	}
	qctx, cancel := context.WithTimeout(ctx, searchBound)
	defer cancel()
	holders := make(chan string, len(urls))
	for _, u := range urls {
		go func() {
			held, err := r.peers.Held(qctx, u, ds, []int{c})
			if err != nil || len(held) != 1 {
				u = ""
			}
			holders <- u
		}()
	}
	for range urls {
		u := <-holders
		if u == "" {
			continue
		}
		if err := r.peers.FetchChunk(ctx, u, ds, c, buf); err != nil {
			r.log.Debug().Err(err).Str("peer", u).Str("chunk", k.String()).Msg("a peer that held a chunk of this node's own no longer gives it")
			continue
		}
		if err := verify(buf); err != nil {
			r.log.Warn().Err(err).Str("peer", u).Str("chunk", k.String()).Msg("a chunk from a peer failed its check; reading the store")
			return false
		}
		r.log.Debug().Str("peer", u).Str("chunk", k.String()).Msg("a chunk of this node's own found at a peer after a fault")
		return true
	}
	return false
}

// Learn asks each of peers which of chunks of ds (this node's own that
// its cache does not hold) its cache holds, and names the first that
// holds each for Read. What an earlier Learn or Given named for ds of
// the peers asked now is forgotten.
func (r *Returned) Learn(ctx context.Context, ds *catalog.Dataset, chunks []int, peers []string) {
	r.mu.Lock()
	for k, h := range r.from {
		if h.ds.Name == ds.Name && slices.Contains(peers, h.url) {
			delete(r.from, k)
		}
	}
	r.mu.Unlock()
	if len(chunks) == 0 {
		return
	}
	named := 0
	for _, url := range peers {
		if !r.peers.IsUp(url) {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, heldBound)
		held, err := r.peers.Held(qctx, url, ds, chunks)
		cancel()
		if err != nil {
			r.log.Debug().Err(err).Str("peer", url).Msg("asking a peer which of this node's chunks it holds")
			continue
		}
		r.mu.Lock()
		for _, c := range held {
			if k := ds.ChunkKey(c); r.from[k].url == "" {
				r.from[k] = holder{url: url, ds: ds, c: c}
				named++
			}
		}
		r.mu.Unlock()
	}
	if named > 0 {
		r.log.Info().Str("dataset", ds.Name).Int("chunks", named).
			Msg("this node's peers hold chunks of its own they read for it while it could not reach the store: they are asked for them before the store")
	}
}

// Ask asks the peer at url, which this node is taking back up after it
// was down, which of chunks of ds (this node's own that its cache does
// not hold) its cache holds, and names it for those as Given does: it
// may have read them while it could not reach this node, or when this
// node, cut off from the store, refused them, and this node asked no
// peer it held down when the store answered again (Learn).
func (r *Returned) Ask(ctx context.Context, ds *catalog.Dataset, chunks []int, url string) {
	if len(chunks) == 0 {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, heldBound)
	held, err := r.peers.Held(qctx, url, ds, chunks)
	cancel()
	if err != nil {
		r.log.Debug().Err(err).Str("peer", url).Msg("asking a peer taken back up which of this node's chunks it holds")
		return
	}
	r.Given(url, ds, held)
}

// Given names the peer at url, which told this node its cache holds
// chunks of ds of this node's own (transport.Client.Give: it read them
// from the store while it held this node down, and has just taken it
// back up), for Read, replacing what was named of those chunks before.
// The peer has just reached this node, so Read asks it even while this
// node does not see it up yet: a node cut off from its peers and the
// store holds them down too, and sees them back no sooner than they see
// it.
func (r *Returned) Given(url string, ds *catalog.Dataset, chunks []int) {
	if len(chunks) == 0 {
		return
	}
	r.mu.Lock()
	for _, c := range chunks {
		r.from[ds.ChunkKey(c)] = holder{url: url, ds: ds, c: c, given: true}
	}
	r.mu.Unlock()
	r.log.Info().Str("dataset", ds.Name).Str("peer", url).Int("chunks", len(chunks)).
		Msg("a peer that read chunks of this node's own while it could not reach this node holds them: they are asked of it before the store")
}

// Read implements catalog.Handover: a chunk a peer held when Learn asked,
// or said it holds (Given), is asked of it (once) and verified; for a
// while after a fault, an own chunk no peer was named for is searched for
// at the peers; false (read the store) otherwise, or if the peer no
// longer holds it.
func (r *Returned) Read(ctx context.Context, k chunkcache.Key, buf []byte, verify func([]byte) error) bool {
	r.mu.Lock()
	h, ok := r.from[k]
	delete(r.from, k)
	r.mu.Unlock()
	if !ok {
		return r.search(ctx, k, buf, verify)
	}
	if !h.given && !r.peers.IsUp(h.url) {
		return false
	}
	if err := r.peers.FetchChunk(ctx, h.url, h.ds, h.c, buf); err != nil {
		r.log.Debug().Err(err).Str("peer", h.url).Str("chunk", k.String()).Msg("a peer no longer holds a chunk it read for this node; reading the store")
		return false
	}
	if err := verify(buf); err != nil {
		r.log.Warn().Err(err).Str("peer", h.url).Str("chunk", k.String()).Msg("a chunk from a peer failed its check; reading the store")
		return false
	}
	return true
}
