// Package idleconns caps a server's idle keep-alive connections. A
// connection idle between requests holds its goroutine and its buffers
// (about 10 KiB) until its idle timeout; without a cap, clients that
// open connections and leave them idle — thousands of ranks, each
// reading ahead on a few, or one client opening them on purpose — hold
// as many as they like for as long as the timeout, whatever the node's
// --memory-limit. Past the cap, the connection idle longest is closed:
// a client that sends on it next sees it closed before any of its
// request was read, and Go's and Python's HTTP clients then send it
// again on a new one, as they do after an idle timeout.
//
// Standard library only; a Cap is one server's, made for it, not
// shared through package state.
package idleconns

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// DefaultMax is the idle connections a listener of `brand serve` keeps
// unless told otherwise: a job of 1,024 ranks, each with a connection
// idle between steps, is not cut, and their buffers are about 10 MiB.
const DefaultMax = 1024

// Cap tracks a server's idle connections (its ConnState hook) and
// closes the one idle longest past Max. Its methods are safe for
// concurrent use.
type Cap struct {
	max int

	mu     sync.Mutex
	idle   list.List                  // of net.Conn, the one idle longest first
	at     map[net.Conn]*list.Element // in idle
	closed int64                      // connections closed past the cap
}

// New is a cap of max idle connections; max < 1 is no cap.
func New(max int) *Cap {
	return &Cap{max: max, at: map[net.Conn]*list.Element{}}
}

// Serve sets srv's ConnState to c's (wrapping any it had): the server
// then keeps at most c's max connections idle.
func (c *Cap) Serve(srv *http.Server) {
	prev := srv.ConnState
	srv.ConnState = func(conn net.Conn, s http.ConnState) {
		c.ConnState(conn, s)
		if prev != nil {
			prev(conn, s)
		}
	}
}

// ConnState is an http.Server's ConnState hook: a connection gone idle
// is the newest idle; one past the cap, the oldest idle, is closed.
func (c *Cap) ConnState(conn net.Conn, s http.ConnState) {
	var drop net.Conn
	c.mu.Lock()
	if e, ok := c.at[conn]; ok {
		c.idle.Remove(e)
		delete(c.at, conn)
	}
	if s == http.StateIdle {
		c.at[conn] = c.idle.PushBack(conn)
		if c.max > 0 && c.idle.Len() > c.max {
			oldest := c.idle.Front()
			drop = c.idle.Remove(oldest).(net.Conn)
			delete(c.at, drop)
			c.closed++
		}
	}
	c.mu.Unlock()
	if drop != nil {
		// The server sees its read fail, and closes and forgets it
		// (StateClosed, which finds it gone from here already).
		_ = drop.Close()
	}
}

// Idle is how many connections are idle now.
func (c *Cap) Idle() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idle.Len()
}

// Closed is how many idle connections the cap has closed.
func (c *Cap) Closed() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
