// Package gopcache holds decoded keyframe groups (GOPs) for the clips of
// an order that will want them: a GOP a batch's clips want is decoded
// once and its frames kept for the later batches of the same decode
// horizon (a run of the epoch's positions: a clip job's window, or its
// GOP window under gop_window=) that want them, until the last of those
// is served, within a bound in bytes, the GOP wanted latest evicted
// first.
//
// # Why
//
// A loader that decodes per sample decodes a GOP from its keyframe once
// for every sample that needs a frame of it: a LeRobot sample's few
// frames of each camera, a strided clip's, each decoded with the tens of
// frames before them. The data node knows every sample of the order in
// advance (it is a pure function), so it knows which samples of a horizon
// want which frames of each GOP, and decodes each GOP once for all of
// them, stopping at the last frame any of them wants.
//
// # The policy, and who shares it
//
// Book is the policy alone, with no frames: which GOPs are held, their
// bytes against the limit, which samples of their horizon still want
// them (Served marks the positions a batch served), and which go to make
// room. A GOP a batch wants (Acquire) is a hit when held with every frame
// the batch wants; else it is decoded, and kept when a sample of the
// horizon not yet served wants it after this batch and its frames fit —
// after evicting GOPs whose next sample is further (its distance from its
// horizon's first position not served) than this one's, never a pinned
// one. A kept fill decodes every frame the horizon's samples not yet
// served want (those the batch read the GOPs for), up to the last;
// another decodes the batch's own. A GOP is dropped once every sample
// that wants it is served. Cache keeps frames by a Book; the clip job's
// plan (internal/batch/units/clips) serves an epoch's batches through a
// Book in order, so /plan predicts the GOPs a node decodes by the rule it
// decodes them by (the way package evict is shared by the chunk cache and
// the planner).
//
// Cache.Decide makes a batch's calls of the book at once, in the plan's
// order — each GOP's Acquire, its pin let go at once, then Served for the
// batch's samples — so that a node serving an epoch's batches one after
// another decides exactly what the plan predicted, however its workers
// then decode the GOPs; the frames a batch's leases use are kept for
// them (a count of leases) whatever the book drops meanwhile. A kept
// GOP's fill is claimed by its batch's task when that runs (Claim), and
// filled before that task waits on anything; a batch that wants a GOP
// whose fill no running task has claimed claims it and decodes it itself
// (or, unable to decode every frame of it, decodes its own), so a task
// waits only on a fill under way and the workers never all wait on fills
// queued behind them.
//
// With the room for a horizon's wanted frames, every GOP is decoded once
// a horizon whatever order its batches come in (ranks ask at once:
// TestBookDecodesOnce, TestCacheConcurrent); without, which GOPs are
// decoded again depends on that order, and a plan assumes the order of
// the epoch's batches.
//
// # Memory
//
// Frames are held as the decoder's RGB (PyAV's rgb24), width × height ×
// 3 bytes each, in buffers reserved from Config.Budget (the node's
// decodes: memory.Within, which never waits) up to Config.Limit; a
// buffer is reused for the next GOP's frame of its size (a fresh one
// costs its pages' faults), and spare buffers are given back past a
// quarter of the limit, all of them once no GOP is held. When the budget
// has not the room the book counted (decoders hold the share), a GOP is
// decoded for its batch alone.
//
// # Costs
//
// Acquire is O(the horizon's samples wanting the GOP + log entries);
// Served O(the horizon's entries × log) a position, plus a scan of the
// horizons known; the book keeps a bit a position of each horizon
// touched and not yet served.
//
// # Concurrency
//
// A Cache is safe for concurrent use: one fill a GOP, the batches that
// want it meanwhile wait for it (or their context) once it is claimed. A
// Book is not.
package gopcache
