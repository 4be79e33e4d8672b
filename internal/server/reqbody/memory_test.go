package reqbody_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/internal/server/reqbody"
)

var errBusy = errkind.New(errkind.Busy, "busy")

// TestBodyMemory: a body is read within the memory it reserves, PerByte
// bytes of the share a byte. A declared length reserves all of it before
// the handler reads a byte, or is refused unread (ErrTooLarge, naming the
// memory) when it needs more than the whole share, or after the share's
// wait (its Busy error) while another holder keeps the room; a body
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
			m := memory.New(memory.Config{Budget: memory.Budget{Decodes: share}, MaxWait: 10 * time.Millisecond, Busy: errBusy})
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
				release, err := reqbody.Apply(w, r, reqbody.Bound{Bytes: 4 << 20, Timeout: time.Minute, Memory: acct, PerByte: perByte})
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
