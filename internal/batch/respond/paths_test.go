package respond

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"testing"
	"time"
)

// TestWritePathsAgree: a body goes out by two paths: over a plain TCP
// connection its parts are gathered into writev calls, anywhere else
// (here a recorder) they are coalesced into buffers. Both give the same
// bytes, and the first leaves the connection fit for the next request.
// (The gateway's batches, sample and peers' replies are written so.)
func TestWritePathsAgree(t *testing.T) {
	// A body of n parts the sizes a batch's are: tar headers, samples
	// small and large, padding.
	body := func(n int) net.Buffers {
		var parts net.Buffers
		for i := range n {
			size := []int{512, 300 + i%900, 70000, 12}[i%4]
			parts = append(parts, bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2+1))
		}
		return parts
	}
	wr := New(Config{})
	write := func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("parts"))
		parts := body(n)
		var size int64
		for _, p := range parts {
			size += int64(len(p))
		}
		if _, err := wr.Write(w, r, "application/x-tar", Payload{Parts: parts, N: size}); err != nil {
			t.Errorf("%s: %v", r.URL, err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(write))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	var reused []bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
	for m, parts := range []int{400, 1500, 7} {
		path := "/?parts=" + strconv.Itoa(parts)
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, srv.URL+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || int64(len(got)) != resp.ContentLength {
			t.Fatalf("%s: %s, %d bytes of %d, %v", path, resp.Status, len(got), resp.ContentLength, err)
		}
		rec := httptest.NewRecorder()
		write(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if want := bytes.Join(body(parts), nil); !bytes.Equal(got, want) || !bytes.Equal(rec.Body.Bytes(), want) {
			t.Fatalf("%s: %d bytes over TCP, %d to a recorder, %d in the parts: equal %t and %t", path, len(got), rec.Body.Len(), len(want), bytes.Equal(got, want), bytes.Equal(rec.Body.Bytes(), want))
		}
		if m > 0 && !reused[m] {
			t.Errorf("%s: a new connection; the last body left its connection unusable", path)
		}
	}
}

// TestWriteDeadlineDoesNotOutliveItsResponse: a body's write deadline is
// set on the connection; the next request on the same keep-alive
// connection, after the deadline has passed, is still answered, whether
// its body is written by a Writer or by its handler alone.
func TestWriteDeadlineDoesNotOutliveItsResponse(t *testing.T) {
	wr := New(Config{WriteTimeout: 50 * time.Millisecond, MinWriteRate: 1 << 40})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/plain" {
			_, _ = io.WriteString(w, "answered by the handler")
			return
		}
		part := bytes.Repeat([]byte("x"), 4096)
		if _, err := wr.Write(w, r, "application/x-tar", Payload{Parts: net.Buffers{part, part}, N: 2 * 4096}); err != nil {
			t.Errorf("%s: %v", r.URL, err)
		}
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	for i, path := range []string{"/body", "/plain", "/body", "/plain"} {
		if i > 0 {
			time.Sleep(150 * time.Millisecond) // past the last body's deadline
		}
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("request %d, %s, on the kept-alive connection: %v", i, path, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d, %s: %d, %v", i, path, resp.StatusCode, err)
		}
	}
}
