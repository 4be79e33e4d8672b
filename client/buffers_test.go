package client

import "testing"

// TestBuffersReuse: a released buffer large enough is handed out again
// without a new allocation; one too small is not. The race detector makes
// sync.Pool drop a quarter of what it is given, so reuse is only checked
// without it.
func TestBuffersReuse(t *testing.T) {
	var p buffers
	b := p.get(1000)
	if len(b) != 1000 || cap(b) < 1000+1000/8 {
		t.Fatalf("get(1000): len %d cap %d; want 1000 with an eighth to spare", len(b), cap(b))
	}
	p.put(b)
	if got := p.get(1100); !raceEnabled && &got[0] != &b[0] {
		t.Errorf("a released 1125-byte buffer was not reused for 1100 bytes")
	}
	p.put(make([]byte, 10))
	if got := p.get(100); len(got) != 100 {
		t.Errorf("get(100) after a 10-byte release: len %d", len(got))
	}
	var none *buffers
	if got := none.get(7); len(got) != 7 {
		t.Errorf("nil buffers: len %d", len(got))
	}
	none.put(b) // does nothing
}
