// Package respond writes every HTTP response that carries samples or
// cached bytes — batches, single samples, peers' sample requests, the S3
// face's objects — in one way, under one set of bounds.
//
// A body is complete and verified before its status line is sent (the
// caller read it first); respond sends it in segments of at most
// Segment bytes, each under a write deadline of Config.WriteTimeout plus
// the time to send it at Config.MinWriteRate. A client that stops
// reading is cut off within that bound of its last progress, and with it
// go the pins or the copy its response holds; a client reading faster
// than MinWriteRate is never cut off, however large the body.
//
// A body written straight from pinned cache chunks holds them while the
// client reads. When the cache is under pressure (Config.Pressure: the
// node's one pressure signal, memory.Manager.UnderPressure) the
// rest of such a body is copied out (Payload.Relieve) and its pins go
// back before the client has read it: over plain HTTP/1 the write is
// interrupted and resumed from the copy; over TLS or HTTP/2, where an
// interrupted write cannot be resumed, a body under pressure is copied
// before its first byte.
//
// A body too large to hold at once (a read-through object of gigabytes)
// is a stream: Payload.Next hands over its parts a piece at a time, each
// released once written, under the same deadlines.
//
// # Costs
//
// Over plain HTTP/1 a body is written with writev straight from the
// cached chunks: no copy in user space and one system call per 1,024
// parts. Anywhere else (TLS, HTTP/2, a test recorder) parts smaller than
// 1 MiB are coalesced into 1 MiB writes, which cost less CPU than a write
// call each on the benchmark machine; the coalescing buffers come from the
// node's pools (Config.Buffers: the memory manager's), and a write is
// never longer than 1 MiB whatever buffer the pool hands out.
//
// A Writer holds no per-request state and is safe for concurrent use.
package respond
