package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ClientShare is the part of a share one client's request bodies hold
// while another client's body waits for room: a quarter. Alone, a client
// may hold the whole share.
const ClientShare = 4

// SmallBody is the most a small body asks (an edit of a few hundred
// bytes to 4 KiB, at 4 bytes a byte): one that finds no room has bodies
// still being read give it way, whoever's they are, the largest first.
// Bodies still arriving held room a small body waited on: twelve slow
// exclusion lists of one client held the decodes share while that
// client's next edit of a few hundred bytes waited its 2 s and was
// refused (issue 98, item 11). A body read in steps asks more than this
// at every step (reqbody's first is 64 KiB of body), so it never counts
// as small.
const SmallBody = 16 << 10

// bodies is an Account's room for request bodies (Account.Hold): the
// lowest claim on the share.
//
//   - Below every other holder. A body takes only room that is free now
//     and never waits in the share's queue, so no reservation ever waits
//     behind a body (the queue is first come, first served); it takes
//     none while a reservation waits; and a reservation that finds no
//     room (Account.Reserve: an image's decode, a chunk served in place)
//     has bodies still being read give it theirs, the largest first.
//   - Small bodies first among bodies. A body asking at most SmallBody
//     that finds no room has bodies still being read give it theirs,
//     whoever's, the largest first: it never waits on bodies arriving.
//   - Fair between clients. A client (a name the caller gives: the
//     gateway's is a bearer token's digest and a remote address) may hold
//     the whole share while no other wants it; a body of a client within
//     its share (1/ClientShare of it) that finds no room has the bodies of
//     clients over theirs give it way, and meanwhile no body of a client
//     over its share takes room.
//
// A body read whole is being applied (its answer follows): it no longer
// gives way, and holds its room until its handler is done.
type bodies struct {
	a *Account

	mu      sync.Mutex
	holds   map[*hold]struct{} // every hold, given way or not
	clients map[string]int64   // bytes held, by client
	fair    int                // waits of clients within their share
	coming  int64              // bytes of holds asked to give way, not yet given back
	freed   chan struct{}      // closed, and replaced, when room may have come free
	waits   atomic.Int64       // bodies waiting for room: wake closes freed only then
}

// hold is one body's room.
type hold struct {
	b       *bodies
	client  string
	giveWay func(error) bool
	held    int64
	gives   []func()
	asked   error // the body's refusal, once it was asked to give way
	settled bool  // read whole: it gives no way
}

func (b *bodies) init(a *Account) {
	b.a, b.holds, b.clients, b.freed = a, map[*hold]struct{}{}, map[string]int64{}, make(chan struct{})
}

// Hold starts a request body's hold on the share, for client: grow
// reserves n more bytes of it, waiting at most wait (and never past
// ctx) for room that nobody with a better claim wants; release gives
// back all it holds, and must be called once the body and what its
// handler made of it are dropped. giveWay is called, at most once and
// never after release, when another needs the body's room: it is given
// the body's refusal (its error wraps Config.Busy) and reports whether
// the body gives way — it must then fail its reads at once and the
// handler let go; false: the body is read whole and is being applied.
// giveWay must not block, nor call grow or release.
func (a *Account) Hold(client string, giveWay func(error) bool) (grow func(ctx context.Context, n int64, wait time.Duration) error, release func()) {
	h := &hold{b: &a.bodies, client: client, giveWay: giveWay}
	a.bodies.mu.Lock()
	a.bodies.holds[h] = struct{}{}
	a.bodies.mu.Unlock()
	return h.grow, h.release
}

func (h *hold) grow(ctx context.Context, n int64, wait time.Duration) error {
	if n <= 0 {
		return nil
	}
	b, a := h.b, h.b.a
	b.waits.Add(1)
	defer b.waits.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	fair := false
	defer func() {
		if fair {
			b.mu.Lock()
			b.fair--
			b.mu.Unlock()
			b.wake()
		}
	}()
	for {
		b.mu.Lock()
		if h.asked != nil {
			b.mu.Unlock()
			return h.asked
		}
		small := n <= SmallBody
		within := small || b.clients[h.client]+n <= a.Size()/ClientShare
		if a.waiting.Load() == 0 && (within || b.fair == 0) {
			if give, ok := a.gate.TryAcquire(n); ok {
				h.held += n
				h.gives = append(h.gives, give)
				b.clients[h.client] += n
				a.held.Add(n)
				b.mu.Unlock()
				return nil
			}
		}
		if within {
			if !fair {
				fair = true
				b.fair++
			}
			// The clients over their share give this one its room; a
			// small body's, any body still being read.
			may := func(o *hold) bool { return b.clients[o.client] > a.Size()/ClientShare }
			if small {
				may = func(o *hold) bool { return o != h }
			}
			b.ask(n-a.free(), may)
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			if err := ctx.Err(); err != nil {
				return err
			}
			a.refused.Add(1)
			return fmt.Errorf("%w: the %s part of the memory budget has no room for %d more bytes of a request body within %s (batches come first, then clients within their share of it); retry later", a.busy, a.part, n, wait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives back what h holds.
func (h *hold) release() {
	b := h.b
	b.mu.Lock()
	delete(b.holds, h)
	if h.held > 0 {
		if b.clients[h.client] -= h.held; b.clients[h.client] <= 0 {
			delete(b.clients, h.client)
		}
		if h.asked != nil {
			b.coming -= h.held
		}
	}
	gives, held := h.gives, h.held
	h.gives, h.held = nil, 0
	h.asked = errReleased // never asked again, and a late grow refused
	b.mu.Unlock()
	for _, give := range gives {
		give()
	}
	b.a.held.Add(-held)
	b.wake()
}

var errReleased = errors.New("memory: the body's hold was released")

// ask has holds that may give way (those of which may says so) give it,
// the largest first, until what is coming back covers need bytes. Called
// with b.mu held.
func (b *bodies) ask(need int64, may func(*hold) bool) {
	if need -= b.coming; need <= 0 {
		return
	}
	var them []*hold
	for h := range b.holds {
		if h.asked == nil && !h.settled && h.held > 0 && may(h) {
			them = append(them, h)
		}
	}
	slices.SortFunc(them, func(x, y *hold) int { return cmp.Compare(y.held, x.held) })
	asked := false
	for _, h := range them {
		if need <= 0 {
			break
		}
		err := fmt.Errorf("%w: this request's body gave its room in the %s part of the memory budget way to batches being served, or to another client's body (a client holds at most 1/%d of the part while another waits); send it again", b.a.busy, b.a.part, ClientShare)
		if !h.giveWay(err) {
			h.settled = true
			continue
		}
		h.asked, asked = err, true
		b.coming += h.held
		need -= h.held
	}
	if asked {
		b.wakeLocked() // a hold asked while it waits for more sees it
	}
}

// wake tells the bodies waiting for room that some may have come free.
func (b *bodies) wake() {
	if b.waits.Load() == 0 {
		return
	}
	b.mu.Lock()
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *bodies) wakeLocked() {
	close(b.freed)
	b.freed = make(chan struct{})
}

// yield has the bodies still being read give way to a reservation of n
// bytes that found no room: those of clients over their share first,
// then the largest.
func (b *bodies) yield(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	need := n - b.a.free()
	over := func(h *hold) bool { return b.clients[h.client] > b.a.Size()/ClientShare }
	b.ask(need, over)
	b.ask(need, func(*hold) bool { return true })
}
