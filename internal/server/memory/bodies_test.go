package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// body is a request body holding room of a share as a handler holds it:
// asked to give way, it lets go at once (its read fails, its handler
// returns), unless it is read whole.
type body struct {
	grow    func(context.Context, int64, time.Duration) error
	release func()
	asked   chan error
	gave    chan error // what it was told, for the test
	whole   bool
}

func holdOf(a *Account, client string) *body {
	b := &body{asked: make(chan error, 1), gave: make(chan error, 1)}
	b.grow, b.release = a.Hold(client, func(err error) bool {
		if b.whole {
			return false
		}
		b.gave <- err
		b.asked <- err
		return true
	})
	go func() {
		if _, ok := <-b.asked; ok {
			b.release()
		}
	}()
	return b
}

// done is the body's handler returning: its hold released.
func (b *body) done() {
	b.release()
	close(b.asked)
}

// slowBodies are n bodies of client, each holding size bytes of a.
func slowBodies(t *testing.T, a *Account, client string, n int, size int64) []*body {
	t.Helper()
	var bs []*body
	for range n {
		b := holdOf(a, client)
		if err := b.grow(t.Context(), size, time.Second); err != nil {
			t.Fatalf("a body's room while the share is free: %v", err)
		}
		bs = append(bs, b)
	}
	return bs
}

// TestSlowBodiesGiveWay is issue 80, case 2 in the memory manager: 20
// slow bodies of one client hold the whole decodes share. A decode that
// serves a batch and another client's body each get their room without
// waiting (no time passes in the bubble): the bodies of the client over
// its share give theirs, the largest first and no more than needed, and
// a body read whole gives none. Alone, one client may hold the whole
// share.
func TestSlowBodiesGiveWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Config{Budget: Budget{Decodes: 64 * mib}, MaxWait: time.Minute, Busy: errBusy})
		a := m.Decodes()
		slow := slowBodies(t, a, "slow", 16, 4*mib)
		slow[0].whole = true // being applied: it gives no way
		if a.Held() != 64*mib {
			t.Fatalf("held %d; want the whole share, which no one else wants", a.Held())
		}

		began := time.Now()
		release, err := a.Reserve(t.Context(), 6*mib)
		if err != nil || time.Since(began) != 0 {
			t.Fatalf("a decode beside the slow bodies: %v after %s; want its room at once", err, time.Since(began))
		}
		defer release()
		other := holdOf(a, "other")
		defer other.done()
		if err := other.grow(t.Context(), 3*mib, time.Second); err != nil || time.Since(began) != 0 {
			t.Fatalf("another client's body: %v after %s; want its room at once", err, time.Since(began))
		}
		synctest.Wait()
		asked := 0
		for i, b := range slow {
			select {
			case err := <-b.gave:
				if i == 0 {
					t.Error("the body read whole was asked to give way")
				}
				if !errors.Is(err, errBusy) || !strings.Contains(err.Error(), "gave its room") {
					t.Errorf("a body's refusal: %v; want the busy sentinel saying it gave way", err)
				}
				asked++
			default:
			}
		}
		if asked != 2+1 {
			t.Errorf("%d bodies gave way; want 3 (2 for the decode's 6 MiB, 1 for the other client's 3 MiB)", asked)
		}
		if a.Held() != 13*4*mib+6*mib+3*mib {
			t.Errorf("held %d; want the 13 slow bodies left, the decode and the other body: 61 MiB", a.Held())
		}
		for _, b := range slow {
			b.done()
		}
	})
}

// TestBodyWaits: a body waits for room at most its wait, then is refused
// (the busy sentinel, counted), never past its context (its deadline);
// while a reservation waits, no body takes room, even room come free; and
// a body of a client over its share takes no room while one within its
// share waits.
func TestBodyWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Config{Budget: Budget{Decodes: 16 * mib}, MaxWait: time.Minute, Busy: errBusy})
		a := m.Decodes()
		full, err := a.Reserve(t.Context(), 16*mib)
		if err != nil {
			t.Fatal(err)
		}
		b := holdOf(a, "c")
		began := time.Now()
		if err := b.grow(t.Context(), mib, 2*time.Second); !errors.Is(err, errBusy) || time.Since(began) != 2*time.Second || a.Refused() != 1 {
			t.Errorf("a wait past its bound: %v after %s, %d refused; want busy after 2s, counted", err, time.Since(began), a.Refused())
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		began = time.Now()
		if err := b.grow(ctx, mib, 2*time.Second); !errors.Is(err, context.DeadlineExceeded) || time.Since(began) != time.Second {
			t.Errorf("a wait past its deadline: %v after %s; want the deadline after 1s", err, time.Since(began))
		}

		full()
		b.done()

		// A decode waits for room; a body waits too, and the room that
		// comes free, though it would hold the body, waits for the decode.
		x, err := a.Reserve(t.Context(), 10*mib)
		if err != nil {
			t.Fatal(err)
		}
		y, err := a.Reserve(t.Context(), 6*mib)
		if err != nil {
			t.Fatal(err)
		}
		decoded := make(chan func(), 1)
		go func() {
			release, err := a.Reserve(t.Context(), 12*mib)
			if err != nil {
				t.Errorf("the decode: %v", err)
			}
			decoded <- release
		}()
		synctest.Wait()
		b = holdOf(a, "c")
		grown := make(chan error, 1)
		go func() { grown <- b.grow(t.Context(), 4*mib, time.Minute) }()
		synctest.Wait()
		y()
		synctest.Wait()
		select {
		case err := <-grown:
			t.Fatalf("a body took room while a decode waited (%v)", err)
		default:
		}
		x()
		(<-decoded)()
		if err := <-grown; err != nil {
			t.Fatalf("the body once the decode is served: %v", err)
		}
		b.done()

		// A client over its share takes no room while one within it
		// waits, even room it fits in and the other does not.
		x, err = a.Reserve(t.Context(), 10*mib)
		if err != nil {
			t.Fatal(err)
		}
		over := slowBodies(t, a, "over", 2, 3*mib)
		over[0].whole = true
		within, more := holdOf(a, "within"), holdOf(a, "over")
		grew := func(b *body, n int64) chan error {
			c := make(chan error, 1)
			go func() { c <- b.grow(t.Context(), n, time.Minute) }()
			synctest.Wait()
			return c
		}
		// The client over its share gives 3 MiB way: not enough.
		withinGrown, moreGrown := grew(within, 4*mib), grew(more, 2*mib)
		select {
		case err := <-moreGrown:
			t.Fatalf("the client over its share took room while one within it waited (%v)", err)
		default:
		}
		x()
		if err := <-withinGrown; err != nil {
			t.Fatal(err)
		}
		if err := <-moreGrown; err != nil {
			t.Fatal(err)
		}
		within.done()
		more.done()
		over[0].done()
	})
}

// TestSmallBodyNeverWaitsOnBodiesArriving is issue 98's item 11 in the
// memory manager: a body of at most SmallBody that finds the share held
// by bodies still being read gets its room at once (no time passes in
// the bubble), one of them — the largest — giving way, whether they are
// of its own client (over its share) or of many clients each within
// theirs. Before, the first waited its 2 s and was refused 503 (a
// client over its share asks no one to give way), and so did the second
// (no client was over its share). A body read whole gives no way.
func TestSmallBodyNeverWaitsOnBodiesArriving(t *testing.T) {
	tests := []struct {
		name    string
		clients int // the slow bodies' clients: 1, or one each
	}{
		{"its own client's", 1},
		{"of clients within their share", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := New(Config{Budget: Budget{Decodes: 64 * mib}, MaxWait: time.Minute, Busy: errBusy})
				a := m.Decodes()
				var slow []*body
				for i := range 16 {
					slow = append(slow, slowBodies(t, a, fmt.Sprint("c", i%tt.clients), 1, 4*mib)...)
				}
				defer func() {
					for _, b := range slow {
						b.done()
					}
				}()
				slow[0].whole = true
				small := holdOf(a, "c0")
				defer small.done()
				began := time.Now()
				if err := small.grow(t.Context(), 1200, 2*time.Second); err != nil || time.Since(began) != 0 {
					t.Fatalf("a body of 1,200 bytes beside bodies arriving: %v after %s; want its room at once", err, time.Since(began))
				}
				synctest.Wait()
				asked := 0
				for i, b := range slow {
					select {
					case <-b.gave:
						if i == 0 {
							t.Error("the body read whole was asked to give way")
						}
						asked++
					default:
					}
				}
				if asked != 1 {
					t.Errorf("%d bodies gave way; want 1", asked)
				}
			})
		})
	}
}
