package s3backend_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/brandgw/brand/s3backend"
)

// TestLocalReportsToObserver checks that a Local store opened with an
// Observer reports each file operation as S3 reports requests: op, bytes
// read or written, and errors wrapping the sentinels.
func TestLocalReportsToObserver(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{t.TempDir(), "file://" + t.TempDir()} {
		t.Run(url, func(t *testing.T) {
			obs := &observer{}
			st, err := s3backend.Open(ctx, url, s3backend.Config{Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("x"), 1000)
			info, err := st.Put(ctx, "a/obj", bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Stat(ctx, "a/obj"); err != nil {
				t.Fatal(err)
			}
			if err := st.ReadRange(ctx, "a/obj", info.ETag, 100, make([]byte, 300)); err != nil {
				t.Fatal(err)
			}
			if _, err := st.List(ctx, "a/"); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Stat(ctx, "missing"); !errors.Is(err, s3backend.ErrNotFound) {
				t.Fatal(err)
			}
			if err := st.ReadRange(ctx, "a/obj", "1-2", 0, make([]byte, 1)); !errors.Is(err, s3backend.ErrChanged) {
				t.Fatal(err)
			}
			tests := []struct {
				op             string
				n, failed      int
				bytes          int64
				wantErrWrapped error
			}{
				{s3backend.OpPut, 1, 0, 1000, nil},
				{s3backend.OpStat, 2, 1, 0, s3backend.ErrNotFound},
				{s3backend.OpGet, 2, 1, 300, s3backend.ErrChanged},
				{s3backend.OpList, 1, 0, 0, nil},
			}
			for _, tt := range tests {
				n, failed := obs.count(tt.op)
				if n != tt.n || failed != tt.failed || obs.bytes(tt.op) != tt.bytes {
					t.Errorf("%s: %d reported, %d failed, %d bytes; want %d, %d, %d", tt.op, n, failed, obs.bytes(tt.op), tt.n, tt.failed, tt.bytes)
				}
				if tt.wantErrWrapped != nil && !obs.failedWith(tt.op, tt.wantErrWrapped) {
					t.Errorf("%s: no reported error wraps %v", tt.op, tt.wantErrWrapped)
				}
			}
		})
	}
}

// failedWith reports whether a failure of op wrapping target was observed.
func (o *observer) failedWith(op string, target error) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.reqs {
		if r.op == op && errors.Is(r.err, target) {
			return true
		}
	}
	return false
}
