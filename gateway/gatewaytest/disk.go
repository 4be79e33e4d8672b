package gatewaytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
)

// ReadEpoch reads epoch e from url whole in batches of 8 and checks that
// every sample comes once, byte for byte as packed.
func (f *Fixture) ReadEpoch(t testing.TB, url string, e int) {
	t.Helper()
	n := f.Index.NumSamples()
	seen := map[string]int{}
	for m := range (n + 7) / 8 {
		resp, body := Get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?batch_size=8", url, e, m))
		if resp.StatusCode != 200 {
			t.Fatalf("epoch %d batch %d: %d %s", e, m, resp.StatusCode, body)
		}
		f.Verify(t, ReadTar(t, body), seen)
	}
	ExactlyOnce(t, seen, n, fmt.Sprintf("epoch %d", e))
}

// Bytes is the fixture's chunks' bytes: the dataset as stored.
func (f *Fixture) Bytes() (total int64) {
	for c := range f.Index.NumChunks() {
		total += f.Index.Chunk(c).Size
	}
	return total
}

// SettleDisk waits until g's disk tier holds at least chunks chunks and
// no write has been in flight for three polls: writes finish after the
// batches that caused them.
func SettleDisk(t testing.TB, g *gateway.Gateway, chunks int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for quiet := 0; quiet < 3; time.Sleep(20 * time.Millisecond) {
		if quiet++; g.DiskStats().Chunks < chunks || g.DiskStats().Writing > 0 {
			quiet = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("disk cache %+v, want %d chunks and no write in flight", *g.DiskStats(), chunks)
		}
	}
}
