// Package memory is a node's one memory manager: every component of the
// gateway that holds bytes beside the chunk cache asks it, so that one
// budget — `brand serve --memory-limit` — bounds them all, and what is
// held is seen in one place.
//
// # Why
//
// A gateway's memory is its chunk cache and what it holds beside it:
// copies of samples out of the cache, transformed batches, work made
// before its request, images being decoded and chunks of datasets served in place
// being decoded. Each of those once kept its own pool and its own count,
// and the largest — an image's decode, a gigabyte for one 8192×8192
// progressive JPEG — none: a node fed such images was killed by the
// kernel, not refused. AIStore's memsys is the model: one manager that
// the data path asks, with size-class pools, a budget, and a pressure
// signal.
//
// # The budget
//
// Budget says what the node's memory is for, in four shares; Fit splits a
// limit into them:
//
//	cache    --cache-size: chunk bytes, admitted and evicted by chunkcache,
//	         which keeps its own buffers (it accounts chunks by their size,
//	         and reuses a buffer only for chunks that fit it); the manager
//	         is told of them (Watch) and counts their capacity
//	base     DefaultBase: the rest of the process — the runtime, indexes,
//	         task plans (the task book's bound, task.DefaultPlanBytes),
//	         connections, workers' kept scratch, pooled buffers not in use
//	copies   --copy-bytes: copies out of the cache (batches assembled in
//	         pieces, copied out under pressure), transformed batches
//	         (premade ones too), next batches' samples fetched from peers;
//	         held until the response that carries them is written
//	         (Copies)
//	decodes  an image's working memory while it decodes, from its header
//	         (transform.Footprint), a chunk of a dataset served in
//	         place while it is read and decoded, a chunk larger
//	         than the whole cache read through while its samples are
//	         copied out (reader.Config.Through), and below them a
//	         request's body while it is read and decoded
//	         (internal/server/reqbody's Memory, reserved before the body
//	         is read; Hold) (Decodes)
//
// With `--memory-limit auto` the limit is the shares' total at their
// defaults — the decodes share at least the largest decode the pixel
// bound allows (transform.Set.MaxWork) — and the Go runtime's memory
// limit is set to it, less what the process holds outside Go's memory
// (brand serve's outsideGo). With a size, the cache and the base come first,
// and copies and decodes share the rest (Fit).
//
// # Waits and refusals
//
// Copies and Decodes are admitted against their share: a caller waits for
// room at most Config.MaxWait, then is refused with an error wrapping
// Config.Busy (chunkcache.ErrBusy: 503 with Retry-After), never let past
// the bound; TryReserve takes room only if it is free now, and Within
// is a part of a share that takes only free room (premade batches and
// next batches' samples never wait). A holder of more than a whole share takes all of it
// once every other holder is gone: a caller that must never do that (an
// image's decode) checks Size first. Stalled tells /readyz when callers
// wait and none has been let through.
//
// # Request bodies
//
// A request's body (an edit, feedback, a plan) is held in the decodes
// share as it is read (Account.Hold), below every other holder: batches
// never wait on a body. A body takes only room that is free now, never
// queues in the share's wait (first come, first served, so a reservation
// queued behind a body would wait on it), and takes none while a
// reservation waits; a Reserve that finds no room has the bodies still
// being read give it theirs, at once (their reads fail, their handlers
// let go). Between clients a body is fair: a client may hold the whole
// share while nobody else wants it, but one whose body waits while it
// holds less than a ClientShare-th of the share has the bodies of
// clients holding more give it way, and no body of theirs takes room
// meanwhile. A small body (at most SmallBody) that finds no room has any
// body still being read give it way: it never waits on bodies arriving.
// A wait for room is bounded by the caller (the body's wait,
// within its deadline). A body read whole is being applied: it gives no
// way, and holds its room until its handler returns.
//
// # Pressure
//
// UnderPressure is the node's one pressure signal: requests wait for
// room in the cache, or, once a response has been written for longer
// than a fast client takes, responses pin more than half of it. A
// response written from pinned chunks then copies the rest of itself out
// (within Copies) and gives its pins back.
//
// # Pools
//
// A buffer of a share (Account.Buffer) takes its capacity from it: its
// size class, or its size where the class would be over a quarter of
// the share (made then, and not pooled).
//
// Get and Put keep buffers by size class, a power of two from 64 KiB up,
// for every user alike: a fresh buffer costs more than its copy (its
// pages are faulted in as it is first written). sync.Pool lets the
// collector take back what is not reused, and what is held at once is
// bounded by the shares, not by the pools. A Get whose class is empty
// takes a buffer of one of the two classes above before allocating.
// Prefill puts touched buffers in at start, as the chunk cache
// preallocates its own: the gateway fills as many as a cold epoch's loads
// of datasets served in place read into at once, within the decodes share,
// and the pools keep that many for good, where every Get sees them.
//
// # Costs
//
// A reservation is an atomic add and a semaphore's; a buffer from a
// pool, a sync.Pool Get. Nothing here runs in the background.
//
// # Concurrency
//
// A Manager and its Accounts are safe for concurrent use. Watch is
// called once, before the node serves.
package memory
