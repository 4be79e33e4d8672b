package seqpack

import (
	"math/rand/v2"
	"testing"
)

// TestRoomsAgainstScan drives rooms with random best-fit steps at
// sequence lengths that use one, two and three levels of its bit set, and
// checks every choice against a scan of all bins for the least room that
// fits, the lowest-numbered among equals.
func TestRoomsAgainstScan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, seq := range []int{1, 2, 63, 64, 65, 4095, 4096, 4097, 300_000, MaxSeq} {
		rs := newRooms(seq)
		var room []int32 // per bin, the naive model's
		for round := range 3 {
			rs.reset(room)
			room = room[:0]
			for step := range 3000 {
				var n int
				switch r.IntN(3) {
				case 0:
					n = 1 + r.IntN(min(seq, 8))
				case 1:
					n = seq - r.IntN(min(seq, 8))
				default:
					n = 1 + r.IntN(seq)
				}
				want := int32(-1)
				for b, x := range room {
					if int(x) >= n && (want < 0 || x < room[want]) {
						want = int32(b)
					}
				}
				x := rs.fit(n)
				if want < 0 {
					if x >= 0 {
						t.Fatalf("seq %d round %d step %d: fit(%d) = room %d; no bin has that room", seq, round, step, n, x)
					}
					b := int32(len(room))
					room = append(room, int32(seq-n))
					if seq > n {
						rs.open(b, int32(seq-n))
					} else {
						rs.child, rs.sib = append(rs.child, 0), append(rs.sib, 0)
					}
					continue
				}
				if x != room[want] {
					t.Fatalf("seq %d round %d step %d: fit(%d) = room %d, want %d", seq, round, step, n, x, room[want])
				}
				if b := rs.take(x); b != want {
					t.Fatalf("seq %d round %d step %d: took bin %d of room %d, want bin %d", seq, round, step, b, x, want)
				}
				room[want] -= int32(n)
				if room[want] > 0 {
					rs.insert(want, room[want])
				}
			}
		}
	}
}
