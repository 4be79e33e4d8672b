package reqbody_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/internal/server/reqbody"
)

var errBusy = errkind.New(errkind.Busy, "busy")

// TestBodyMemory: a body is read within the memory it reserves, PerByte
// bytes of the share a byte. A declared length reserves all of it before
// the handler reads a byte, or is refused unread (ErrTooLarge, naming the
// memory) when it needs more than the whole share, or after its wait
// (Bound.Wait; the share's Busy error) while another holder keeps the
// room; a body
// without a length reserves as it arrives, never more than twice what it
// has read (or the first step), and is refused at the byte past the
// share. What was reserved is given back by release.
func TestBodyMemory(t *testing.T) {
	const share, perByte = 1 << 20, 4
	tests := []struct {
		name    string
		body    int
		chunked bool
		other   int64  // bytes of the share held by another request meanwhile
		refused error  // nil: read whole
		says    string // what the refusal says
	}{
		{"declared, within the share", 200 << 10, false, 0, nil, ""},
		{"declared, the whole share", share / perByte, false, 0, nil, ""},
		{"declared, past the share", share/perByte + 1, false, 0, reqbody.ErrTooLarge, "takes 1048580 bytes of memory"},
		{"declared, the share held by another", 200 << 10, false, share / 2, errBusy, ""},
		{"chunked, within the share", 200 << 10, true, 0, nil, ""},
		{"chunked, the whole share", share / perByte, true, 0, nil, ""},
		{"chunked, past the share", share/perByte + 1, true, 0, reqbody.ErrTooLarge, "more than the 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memory.New(memory.Config{Budget: memory.Budget{Decodes: share}, MaxWait: time.Minute, Busy: errBusy})
			acct := m.Decodes()
			if tt.other > 0 {
				give, err := acct.Reserve(t.Context(), tt.other)
				if err != nil {
					t.Fatal(err)
				}
				defer give()
			}
			type seen struct {
				err              error
				before, most, at int64 // held before the first read, at most while reading, and after release
				read             int
			}
			got := make(chan seen, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var s seen
				release, err := reqbody.Apply(w, r, reqbody.Bound{Bytes: 4 << 20, Timeout: time.Minute, Memory: acct, PerByte: perByte, Wait: 10 * time.Millisecond})
				s.before = acct.Held() - tt.other
				if err == nil {
					buf := make([]byte, 32<<10)
					for {
						n, rerr := r.Body.Read(buf)
						s.read += n
						s.most = max(s.most, acct.Held()-tt.other)
						if held := acct.Held() - tt.other; tt.chunked && held > max(2*int64(s.read)*perByte, 64<<10*perByte) {
							err = fmt.Errorf("%d bytes held after %d read", held, s.read)
							break
						}
						if rerr != nil {
							if rerr != io.EOF {
								err = rerr
							}
							break
						}
					}
				}
				release()
				s.err, s.at = err, acct.Held()-tt.other
				got <- s
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
				}
			}))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(strings.Repeat("a", tt.body)))
			if tt.chunked {
				req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			s := <-got
			switch {
			case tt.refused == nil && s.err != nil:
				t.Fatalf("refused: %v", s.err)
			case tt.refused != nil && (!errors.Is(s.err, tt.refused) || !strings.Contains(fmt.Sprint(s.err), tt.says)):
				t.Fatalf("%v; want %v saying %q", s.err, tt.refused, tt.says)
			case tt.refused == nil && s.read != tt.body:
				t.Fatalf("read %d of %d bytes", s.read, tt.body)
			case tt.refused == nil && !tt.chunked && s.before != int64(tt.body)*perByte:
				t.Fatalf("%d bytes reserved before the body was read; want %d", s.before, tt.body*perByte)
			case s.most > share:
				t.Fatalf("%d bytes reserved, more than the share", s.most)
			case s.at != 0:
				t.Fatalf("%d bytes still reserved after release", s.at)
			}
		})
	}
}

// TestBodyDeadlineBoundsItsWait: a body's deadline bounds its wait for
// memory as it bounds its reads. With the share held by a decode and a
// wait longer than the deadline, a declared body (waiting before the
// handler reads) and a chunked one (waiting at its first read) are each
// refused at the deadline with ErrDeadline naming it, their connections
// ended, nothing held after. Before, the wait was the share's (a minute)
// and the deadline was set after it: a body was held 90 s where its
// deadline was 30 s.
func TestBodyDeadlineBoundsItsWait(t *testing.T) {
	const timeout = 300 * time.Millisecond
	m := memory.New(memory.Config{Budget: memory.Budget{Decodes: 1 << 20}, MaxWait: time.Minute, Busy: errBusy})
	acct := m.Decodes()
	give, err := acct.Reserve(t.Context(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer give()
	for _, framing := range []string{"Content-Length: 400\r\n", "Transfer-Encoding: chunked\r\n"} {
		got := make(chan error, 1)
		srv := server(t, reqbody.Bound{Bytes: 1000, Timeout: timeout, Memory: acct, PerByte: 4, Wait: time.Minute}, got)
		c := send(t, srv.Listener.Addr().String(), post("/", framing), 50*time.Millisecond)
		if status := c.ended(t, timeout); status != http.StatusBadRequest {
			t.Errorf("%s: status %d; want 400", framing, status)
		}
		if err := <-got; !errors.Is(err, reqbody.ErrDeadline) || !strings.Contains(err.Error(), "300ms") {
			t.Errorf("%s: %v; want ErrDeadline naming 300ms", framing, err)
		}
		if held := acct.Held(); held != 1<<20 {
			t.Errorf("%s: %d bytes held after the body's refusal; want the decode's alone", framing, held)
		}
	}
}

// TestBodyGivesWay: a chunked body being read holds its room until a
// decode needs it; then its read fails at once with the share's Busy
// error, which answers the request 503 (httperr.Status) whatever the
// handler wraps it in, and the decode gets the room.
func TestBodyGivesWay(t *testing.T) {
	const share = 1 << 20
	m := memory.New(memory.Config{Budget: memory.Budget{Decodes: share}, MaxWait: time.Minute, Busy: errBusy})
	acct := m.Decodes()
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := reqbody.Apply(w, r, reqbody.Bound{Bytes: 1 << 20, Timeout: time.Minute, Memory: acct, PerByte: 4, Client: "slow", Wait: time.Minute})
		defer release()
		if err == nil {
			_, err = io.ReadAll(r.Body)
			err = fmt.Errorf("%w: %w", reqbody.ErrBadJSON, err)
		}
		got <- err
		w.WriteHeader(httperr.Status(err))
	}))
	defer srv.Close()
	first := strings.Repeat("x", 100<<10)
	c := send(t, srv.Listener.Addr().String(), post("/", "Transfer-Encoding: chunked\r\n")+fmt.Sprintf("%x\r\n%s\r\n", len(first), first), 50*time.Millisecond)
	for until := time.Now().Add(time.Minute); acct.Held() < 4*int64(len(first)); time.Sleep(time.Millisecond) {
		if time.Now().After(until) {
			t.Fatalf("the body holds %d bytes after a minute; want its first chunk's room", acct.Held())
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), slack)
	defer cancel()
	give, err := acct.Reserve(ctx, share)
	if err != nil {
		t.Fatalf("a decode of the whole share beside a slow body: %v; want the body to give it way", err)
	}
	give()
	if err := <-got; !errors.Is(err, errBusy) || !strings.Contains(err.Error(), "gave its room") {
		t.Errorf("the body: %v; want the busy sentinel saying it gave its room way", err)
	}
	if status := c.ended(t, slack); status != http.StatusServiceUnavailable {
		t.Errorf("status %d; want 503", status)
	}
}

// TestSlowBodiesLeaveRoomForASmallOne is issue 98's item 11: beside 12
// exclusion bodies of one client that sent 4 MiB at once and then wait
// (4 bytes of memory a byte), that client's small edit of a few hundred
// bytes finds room at once. The bodies hold 12 × 16 MiB of what they
// read in a share of 384 MiB; what held the rest was their steps
// reserved ahead of what had arrived — a chunked body doubled what it
// covered, so the byte past 4 MiB reserved 4 MiB more (16 MiB of the
// share) that the client had not sent, and the twelve held all 384 MiB:
// the small body waited out its wait and was refused 503. A body's step
// ahead of its bytes is bounded (maxAhead), so the room bodies still
// arriving hold is about what they read.
func TestSlowBodiesLeaveRoomForASmallOne(t *testing.T) {
	const slow, sent, perByte = 12, 4<<20 + 1, 4
	m := memory.New(memory.Config{Budget: memory.Budget{Decodes: slow * 2 * (sent - 1) * perByte}, MaxWait: time.Minute, Busy: errBusy})
	acct := m.Decodes()
	arrived := make(chan error, slow)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := reqbody.Apply(w, r, reqbody.Bound{Bytes: 256 << 20, Timeout: time.Minute, Memory: acct, PerByte: perByte,
			Client: "one client", Wait: 200 * time.Millisecond})
		defer release()
		if err == nil && r.ContentLength < 0 {
			// A slow body: its first bytes read, then the rest waited for.
			_, err = io.ReadFull(r.Body, make([]byte, sent))
			arrived <- err
			_, _ = io.Copy(io.Discard, r.Body)
			return
		}
		if err == nil {
			_, err = io.Copy(io.Discard, r.Body)
		}
		if err != nil {
			http.Error(w, err.Error(), httperr.Status(err))
		}
	}))
	defer srv.Close()
	var writers []*io.PipeWriter
	defer func() {
		for _, pw := range writers {
			pw.CloseWithError(errors.New("test over"))
		}
	}()
	for range slow {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, pr)
		req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		go func() { _, _ = pw.Write(make([]byte, sent)) }()
	}
	for range slow {
		if err := <-arrived; err != nil {
			t.Fatalf("a slow body's first %d bytes: %v", sent, err)
		}
	}
	held := acct.Held()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(strings.Repeat("k", 300)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a 300-byte body beside %d slow bodies holding %d of %d bytes: status %d, want 200", slow, held, acct.Size(), resp.StatusCode)
	}
	if most := int64(slow) * (sent + 1<<20) * perByte; held > most {
		t.Errorf("%d slow bodies of %d bytes read hold %d bytes of the share, more than their bytes and a step of 1 MiB each (%d)", slow, sent, held, most)
	}
}
