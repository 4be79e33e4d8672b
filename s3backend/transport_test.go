package s3backend_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"unsafe"

	"github.com/brandgw/brand/s3backend"
)

// overlaps reports whether p's bytes lie inside q's.
func overlaps(p, q []byte) bool {
	if len(p) == 0 || len(q) == 0 {
		return false
	}
	a, b := uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(&q[0]))
	return a >= b && a < b+uintptr(len(q))
}

// spyConn records, for each read of the connection, whether it filled the
// caller's slice (set by the test before each body read) or another
// buffer: the transport's.
type spyConn struct {
	net.Conn
	into    *[]byte
	direct  *int64
	through *int64
}

func (c spyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if overlaps(p, *c.into) {
		*c.direct += int64(n)
	} else {
		*c.through += int64(n)
	}
	return n, err
}

// TestTransportReadsIntoCaller: a response body read in slices of a few
// KiB to 64 KiB (a streaming decoder's reads: a snappy literal, a page
// header, a value's tail) lands in the caller's slice from the socket,
// not first in the transport's buffer and then copied, which cost a cold
// Parquet epoch a copy of every image it streamed (OpenRange).
func TestTransportReadsIntoCaller(t *testing.T) {
	const size = 4 << 20
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i * 7)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		for off := 0; off < size; off += 48 << 10 {
			w.Write(body[off:min(off+48<<10, size)])
		}
	}))
	defer srv.Close()

	for _, k := range []int{8 << 10, 30 << 10, 64<<10 - 5} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			var into []byte
			var direct, through int64
			tr := s3backend.DefaultTransport(4)
			dial := tr.DialContext
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return spyConn{Conn: c, into: &into, direct: &direct, through: &through}, nil
			}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, k)
			got := 0
			for {
				into = buf
				n, err := resp.Body.Read(buf)
				for i := range n {
					if buf[i] != body[got+i] {
						t.Fatalf("byte %d: got %d, want %d", got+i, buf[i], body[got+i])
					}
				}
				got += n
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if got != size {
				t.Fatalf("read %d bytes, want %d", got, size)
			}
			// The response's header and what arrived with it pass through
			// the transport's buffer; the body after it should not.
			if through > 16<<10 {
				t.Errorf("reads of %d bytes: %d of the body's %d bytes came through the transport's buffer (%d straight into the caller's)", k, through, size, direct)
			}
		})
	}
}
