package planner

import (
	"strings"
	"testing"
)

// TestResizePlanByHand: a resize from 2 to 3 planned nodes of a dataset of
// 8 chunks of 10 samples and 100..800 bytes, worked out by hand from the
// owners and the job's windows:
//
//	owners before (brand-0, brand-1): [1 0 0 0 0 1 1 1]
//	owners after (brand-0..2):        [1 0 0 2 1 2 0 1]
//	moved: chunks 3 (400 B, to brand-2), 4 (500, to brand-1),
//	       5 (600, to brand-2), 6 (700, to brand-0): 4 chunks, 2,200 B
//	epoch 1 of seed 3, window 2: windows 0 and 1 are chunks 0 7 and 5 4,
//	so chunks 4 and 5 are needed next: 2 chunks, 1,100 B, one per gainer
//	shares before: brand-0 1,400 B, brand-1 2,200 B
//
// With caches of 2,200 B the old owners hold them, and the other moved
// chunks too: all 2,200 B from peers, chunks 3 and 6 (1,100 B) after the
// soon ones; the slowest gainer is brand-2 (chunks 5 and 3, 1,000 B):
// 10 s, its soon chunk 5 in 600/100 = 6 s. With 2,199 B, or in a first
// epoch, the soon ones come from the store (brand-2's 600 B in 600/50 =
// 12 s) and the others are left to the jobs.
func TestResizePlanByHand(t *testing.T) {
	d := Dataset{ChunkSizes: []int64{100, 200, 300, 400, 500, 600, 700, 800}, Counts: []int{10, 10, 10, 10, 10, 10, 10, 10}}
	tests := []struct {
		name        string
		first       int
		cache       int64
		peer, store int64
		rest        int
		warm, soon  float64
	}{
		{"old owners hold them", 1, 2200, 2200, 0, 2, 10, 6},
		{"shares over the cache", 1, 2199, 0, 1100, 0, 12, 12},
		{"a first epoch", 0, 1 << 30, 0, 1100, 0, 12, 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := Job{FirstEpoch: tc.first}
			job.Seed, job.Window = 3, 2
			p, err := MakeResizePlan(ResizeInput{Dataset: d, IndexKey: 7, Job: job, From: PlannedMembers(2), To: PlannedMembers(3),
				PrefetchWindows: 1, NodeCacheBytes: tc.cache, StoreBytesPerSec: 50, PeerBytesPerSec: 100})
			if err != nil {
				t.Fatal(err)
			}
			if p.MovedChunks != 4 || p.MovedBytes != 2200 || p.SoonChunks != 2 || p.SoonBytes != 1100 {
				t.Errorf("moved %d chunks (%d B), %d needed next (%d B); want 4 (2200 B), 2 (1100 B)", p.MovedChunks, p.MovedBytes, p.SoonChunks, p.SoonBytes)
			}
			if p.PeerBytes != tc.peer || p.StoreBytes != tc.store || p.RestChunks != tc.rest || p.WarmSeconds != tc.warm || p.SoonSeconds != tc.soon {
				t.Errorf("peer %d B, store %d B, %d other chunks, warm %v s (soon %v s); want %d, %d, %d, %v (%v)",
					p.PeerBytes, p.StoreBytes, p.RestChunks, p.WarmSeconds, p.SoonSeconds, tc.peer, tc.store, tc.rest, tc.warm, tc.soon)
			}
			var b strings.Builder
			if err := p.WriteText(&b); err != nil || !strings.Contains(b.String(), "from 2 to 3 nodes") {
				t.Errorf("text: %v: %s", err, b.String())
			}
		})
	}
}

// TestResizedMembers: a larger cluster keeps the members and adds planned
// ones; a smaller one keeps the first.
func TestResizedMembers(t *testing.T) {
	from := PlannedMembers(3)
	if got := ResizedMembers(from, 5); got.Len() != 5 || got.Version() != PlannedMembers(5).Version() {
		t.Errorf("3 to 5: %v", got.Members())
	}
	if got := ResizedMembers(from, 2); got.Version() != PlannedMembers(2).Version() {
		t.Errorf("3 to 2: %v", got.Members())
	}
}

// TestResizePlanWithExclusion: the by-hand resize of TestResizePlanByHand
// for a job whose exclusion list (from the start of epoch 0) empties
// chunk 5, one of the two moved chunks of its next windows: the job's
// windows name only the chunks that keep a sample, as the gateway's use
// tables do, so chunk 5 is not loaded before the change. It moves all
// the same, and the old owners' caches hand it over with the other moved
// chunks when they hold them. With the caches holding them: chunk 4
// (500 B) soon from brand-0's cache in 5 s, chunks 3, 5 and 6 after; the
// slowest gainer brand-2 (3 and 5, 1,000 B) in 10 s. Without: chunk 4
// from the store in 500/50 = 10 s, the others left to the jobs. A list
// from a position past the windows leaves the plan as it was.
func TestResizePlanWithExclusion(t *testing.T) {
	d := Dataset{ChunkSizes: []int64{100, 200, 300, 400, 500, 600, 700, 800}, Counts: []int{10, 10, 10, 10, 10, 10, 10, 10}}
	x := testExclusion(d, []int{5}, 0, 0)
	late := testExclusion(d, []int{5}, 1, 40) // from position 40 of epoch 1: after windows 0 and 1
	tests := []struct {
		name              string
		x                 *Edit
		cache             int64
		soon              int
		soonBytes         int64
		peer, store       int64
		rest              int
		warm, soonSeconds float64
	}{
		{"old owners hold them", x, 2200, 1, 500, 2200, 0, 3, 10, 5},
		{"shares over the cache", x, 2199, 1, 500, 0, 500, 0, 10, 10},
		{"a list from after the windows", late, 2199, 2, 1100, 0, 1100, 0, 12, 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := Job{FirstEpoch: 1, Edit: tc.x}
			job.Seed, job.Window = 3, 2
			p, err := MakeResizePlan(ResizeInput{Dataset: d, IndexKey: 7, Job: job, From: PlannedMembers(2), To: PlannedMembers(3),
				PrefetchWindows: 1, NodeCacheBytes: tc.cache, StoreBytesPerSec: 50, PeerBytesPerSec: 100})
			if err != nil {
				t.Fatal(err)
			}
			if p.MovedChunks != 4 || p.MovedBytes != 2200 || p.SoonChunks != tc.soon || p.SoonBytes != tc.soonBytes {
				t.Errorf("moved %d chunks (%d B), %d needed next (%d B); want 4 (2200 B), %d (%d B)", p.MovedChunks, p.MovedBytes, p.SoonChunks, p.SoonBytes, tc.soon, tc.soonBytes)
			}
			if p.PeerBytes != tc.peer || p.StoreBytes != tc.store || p.RestChunks != tc.rest || p.WarmSeconds != tc.warm || p.SoonSeconds != tc.soonSeconds {
				t.Errorf("peer %d B, store %d B, %d other chunks, warm %v s (soon %v s); want %d, %d, %d, %v (%v)",
					p.PeerBytes, p.StoreBytes, p.RestChunks, p.WarmSeconds, p.SoonSeconds, tc.peer, tc.store, tc.rest, tc.warm, tc.soonSeconds)
			}
		})
	}
	// An edit that is no edit of the dataset (an append over more
	// chunks than it has) is refused.
	job := Job{FirstEpoch: 1, Edit: &Edit{Chunks: 99}}
	job.Seed, job.Window = 3, 2
	if _, err := MakeResizePlan(ResizeInput{Dataset: d, IndexKey: 7, Job: job, From: PlannedMembers(2), To: PlannedMembers(3), StoreBytesPerSec: 50}); err == nil {
		t.Error("an append over 99 chunks of a dataset of 8: no error")
	}
}

// TestResizePlanWithAppend: the by-hand resize for a job with an append
// record of epoch 2 over the first 6 chunks: epoch 1 is the old chunks'
// order, so with every window prefetched the moved chunks needed next
// are the old ones (3, 4 and 5: 1,500 B), not chunk 6, which the job
// reads from the record's epoch on; from the record's epoch, all four.
func TestResizePlanWithAppend(t *testing.T) {
	d := Dataset{ChunkSizes: []int64{100, 200, 300, 400, 500, 600, 700, 800}, Counts: []int{10, 10, 10, 10, 10, 10, 10, 10}}
	for _, tc := range []struct {
		first, soon int
		soonBytes   int64
	}{{1, 3, 1500}, {2, 4, 2200}, {3, 4, 2200}} {
		job := Job{FirstEpoch: tc.first, Edit: &Edit{Version: "v", Chunks: 6, Epoch: 2, From: 30}}
		job.Seed, job.Window = 3, 2
		p, err := MakeResizePlan(ResizeInput{Dataset: d, IndexKey: 7, Job: job, From: PlannedMembers(2), To: PlannedMembers(3),
			PrefetchWindows: 8, NodeCacheBytes: 1 << 20, StoreBytesPerSec: 50, PeerBytesPerSec: 100})
		if err != nil {
			t.Fatal(err)
		}
		if p.MovedChunks != 4 || p.SoonChunks != tc.soon || p.SoonBytes != tc.soonBytes {
			t.Errorf("epoch %d: moved %d chunks, %d needed next (%d B); want 4, %d (%d B)", tc.first, p.MovedChunks, p.SoonChunks, p.SoonBytes, tc.soon, tc.soonBytes)
		}
	}
}
