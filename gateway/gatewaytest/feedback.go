package gatewaytest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/brandgw/brand/internal/cluster/transport"
)

// BinaryFeedback encodes (ID, loss) records, the body of a binary
// POST /importance/{job}/feedback.
func BinaryFeedback(ids []int, losses []float32) []byte {
	var b []byte
	for i, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(losses[i]))
	}
	return b
}

// Sealed is the answer to POST /importance/{job}/seal.
type Sealed struct {
	Version  string `json:"version"`
	Reported int    `json:"reported"`
	Parts    int    `json:"parts"`
}

// Seal seals epoch of job at base, after prev (if not ""), and fails
// unless the seal answers 200.
func Seal(t testing.TB, base, job string, epoch int, prev string) Sealed {
	t.Helper()
	url := fmt.Sprintf("%s/importance/%s/seal?epoch=%d", base, job, epoch)
	if prev != "" {
		url += "&prev=" + prev
	}
	resp, body := Post(t, url, "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("seal: %s: %s", resp.Status, body)
	}
	var s Sealed
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// SampleList is the body of a peer's sample request for ids.
func SampleList(ids []int) []byte {
	b := []byte{}
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return b
}

// PeerRequest posts a sample request to base's internal endpoint as a
// node would (unsigned: the cluster has no secret), and returns the
// response and its body.
func PeerRequest(t testing.TB, base, query string, ids []int, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return Do(t, http.MethodPost, base+transport.SamplesPath+"?"+query, SampleList(ids), hdr...)
}
