package s3backend_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/brandgw/brand/s3backend"
)

// testPacerWaitIsNotIdle reads through a Pacer whose budget makes a GET
// wait 5 times the idle timeout, with no retries: the read arrives whole,
// since the idle clock stands while the request waits for the budget. It
// ran before it was sent: the store-outage lesson of the learned budget
// (issue 98, item 13) made waits of a second, each GET was abandoned
// unsent as a stall, and the fault suite's reads gave up after 9 tries.
func (e *env) testPacerWaitIsNotIdle(t *testing.T) {
	const idle = 100 * time.Millisecond
	data := randomBytes(2*testPartSize, 43)
	tests := []struct {
		name string
		read func(ctx context.Context, s *s3backend.S3, etag string) ([]byte, error)
	}{
		{"ReadRange, two parts", func(ctx context.Context, s *s3backend.S3, etag string) ([]byte, error) {
			p := make([]byte, len(data))
			return p, s.ReadRange(ctx, "obj", etag, 0, p)
		}},
		{"OpenRange", func(ctx context.Context, s *s3backend.S3, etag string) ([]byte, error) {
			r, err := s.OpenRange(ctx, "obj", etag, 0, int64(len(data)))
			if err != nil {
				return nil, err
			}
			defer r.Close()
			return io.ReadAll(r)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pacer *s3backend.Pacer
			s, _ := e.store(t, &faults{}, nil, func(c *s3backend.Config) {
				c.IdleTimeout, c.MaxRetries, c.Parallel = idle, -1, 1
				pacer = s3backend.NewPacer(s3backend.Budget{GETs: 2}, c.Transport) // a GET each 500 ms, a burst of one
				c.Transport = pacer
			})
			info := mustPut(t, s, "obj", data)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := s.ReadRange(ctx, "obj", info.ETag, 0, make([]byte, 1)); err != nil { // the burst spent
				t.Fatal(err)
			}
			got, err := tc.read(ctx, s, info.ETag)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read through the pacer = %v (bytes equal: %t), want the object", err, bytes.Equal(got, data))
			}
			if st := pacer.Stats(); st.WaitSeconds < (idle * 3).Seconds() {
				t.Fatalf("the GETs waited %.2f s for the budget, want more than the idle timeout's %v", st.WaitSeconds, idle)
			}
		})
	}
}
