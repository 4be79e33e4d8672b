package s3backend_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/brandgw/brand/s3backend"
)

// readAllIn reads r to its end in reads of at most k bytes, as a decoder
// asking for a header, then a value, then the next header does.
func readAllIn(r io.Reader, k int) ([]byte, error) {
	var out []byte
	buf := make([]byte, k)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// testOpenRange reads a range as a stream: whole, resumed after bodies
// cut short and stalled (each byte given once, in order), and failing as
// ReadRange fails when the object changed, the range runs past its end or
// the retry budget is spent.
func (e *env) testOpenRange(t *testing.T) {
	data := randomBytes(1<<20+333, 41)
	const off, n = 1000, 900 << 10
	want := data[off : off+n]
	ctx := context.Background()

	cases := []struct {
		name    string
		faults  *faults
		idle    time.Duration
		gets    int   // object GETs the read takes
		wantErr error // nil: the bytes
	}{
		{name: "one GET", gets: 1},
		{name: "cut twice", faults: &faults{cuts: 2, cutAfter: 100 << 10}, gets: 3},
		{name: "stalled once", faults: &faults{stalls: 1, cutAfter: 200 << 10}, idle: 200 * time.Millisecond, gets: 2},
		{name: "slow down twice", faults: &faults{slowDowns: 2}, gets: 3},
		{name: "cut past the budget", faults: &faults{cuts: 100, cutAfter: 1 << 10}, gets: 5, wantErr: s3backend.ErrUnavailable},
		{name: "changed", faults: &faults{rewriteETag: "0123456789abcdef0123456789abcdef"}, gets: 1, wantErr: s3backend.ErrChanged},
	}
	for i := range cases {
		tc := &cases[i]
		t.Run(tc.name, func(t *testing.T) {
			f := tc.faults
			if f == nil {
				f = &faults{}
			}
			s, _ := e.store(t, f, nil, func(c *s3backend.Config) {
				if tc.idle > 0 {
					c.IdleTimeout = tc.idle
				}
			})
			info := mustPut(t, s, "chunk", data)
			r, err := s.OpenRange(ctx, "chunk", info.ETag, off, n)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got, err := readAllIn(r, 7000)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				if _, again := r.Read(make([]byte, 10)); !errors.Is(again, tc.wantErr) {
					t.Errorf("a Read after the failure: %v, want the same error", again)
				}
				if !bytes.Equal(got, want[:len(got)]) {
					t.Error("the bytes given before the failure differ from the object's")
				}
			} else if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("err %v, %d bytes, equal %t", err, len(got), bytes.Equal(got, want))
			}
			f.mu.Lock()
			gets, ranges := f.gets, f.ranges
			f.mu.Unlock()
			if gets != tc.gets {
				t.Errorf("%d object GETs (%q), want %d", gets, ranges, tc.gets)
			}
		})
	}

	t.Run("past the end", func(t *testing.T) {
		s, _ := e.store(t, nil, nil, nil)
		info := mustPut(t, s, "chunk", data)
		r, err := s.OpenRange(ctx, "chunk", info.ETag, int64(len(data))-10, 20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(r); !errors.Is(err, s3backend.ErrOutOfRange) {
			t.Fatalf("err %v, want ErrOutOfRange", err)
		}
	})
	t.Run("empty and cancelled", func(t *testing.T) {
		s, _ := e.store(t, nil, nil, nil)
		info := mustPut(t, s, "chunk", data)
		r, _ := s.OpenRange(ctx, "chunk", info.ETag, 5, 0)
		if b, err := io.ReadAll(r); err != nil || len(b) != 0 {
			t.Fatalf("an empty range: %d bytes, %v", len(b), err)
		}
		cctx, cancel := context.WithCancel(ctx)
		r, _ = s.OpenRange(cctx, "chunk", info.ETag, 0, 1000)
		cancel()
		if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled read: %v, want context.Canceled", err)
		}
		if _, err := s.OpenRange(ctx, "chunk", "", -1, 10); err == nil {
			t.Error("a negative offset: no error")
		}
	})
}
