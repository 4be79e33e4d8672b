package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/photos"
)

// TestSlowBodiesStarveNoOne is issue 80, case 2's reproduction: 20
// chunked exclusion bodies of one client (its token, its address), each
// a first chunk of 256 KiB and then a byte every 100 ms, hold the whole
// decodes part of a node's memory (16 MiB). Another client's small edit
// and a cold transformed batch, whose images decode in that part, are
// then answered at once: the slow bodies give their room way. Before,
// each waited behind them for the share's wait (a minute; the bodies'
// deadline was a minute too), and this test's client gave up after 10 s.
// The slow client's own small edit is answered at once too (issue 98,
// item 11: it waited its 2 s and was refused 503).
func TestSlowBodiesStarveNoOne(t *testing.T) {
	const mib = 1 << 20
	f := newImageFixture(t, 1, 4, func(id int) (string, []byte) {
		p, err := photos.Sized(3, id, 40, 30, 90)
		if err != nil {
			t.Fatal(err)
		}
		return "jpg", p.JPEG
	})
	_, url := startTransforms(t, f, func(c *gateway.Config) {
		c.AuthTokens = []string{"slow-client", "other-client"}
		c.CacheSize, c.MemoryLimit = 16*mib, 16*mib+256*mib+32*mib // decodes: 16 MiB
		c.LargeBodyTimeout = time.Minute
	})
	const job = "dataset=test&seed=7&window=2&batch_size=2"
	first := `{"from_step": 1, "keys": ["` + strings.Repeat("x", 256<<10)
	for range 20 {
		head := "POST /jobs/slow/exclude?" + job + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer slow-client\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n", len(first), first)
		sendSlowly(t, url, http.MethodPost, head, true)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	as := func(token, method, path, body string) (int, string, time.Duration) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		began := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error(), time.Since(began)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(began)
	}
	ask := func(method, path, body string) (int, string, time.Duration) {
		t.Helper()
		return as("other-client", method, path, body)
	}
	var key string
	for k := range f.ids {
		key = k
	}
	// The slow bodies hold the whole part before the other client asks.
	for held, until := int64(0), time.Now().Add(time.Minute); held < 15*mib; {
		if time.Now().After(until) {
			t.Fatalf("the slow bodies hold %d bytes of the decodes part after a minute; want 15 MiB", held)
		}
		status, body, _ := ask(http.MethodGet, "/stats", "")
		var st struct {
			Memory api.MemoryStats `json:"memory"`
		}
		if err := json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&st); status != http.StatusOK || err != nil {
			t.Fatalf("/stats: %d %v", status, err)
		}
		for _, s := range st.Memory.Shares {
			if s.Share == "decodes" {
				held = s.Held
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The slow client's own small edit (issue 98, item 11): a body of a
	// few hundred bytes never waits on bodies still arriving, its own
	// client's included (it waited its 2 s and was refused 503).
	status, body, took := as("slow-client", http.MethodPost, "/jobs/own/exclude?"+job, `{"from_step": 1, "keys": ["`+key+`"]}`)
	if status != http.StatusCreated || took > time.Second {
		t.Errorf("the slow client's own small edit: %d %s after %s; want 201 at once", status, body, took.Round(time.Millisecond))
	}
	status, body, took = ask(http.MethodGet, "/epoch/0/batch/0?batch_size=2&transform=plain", "")
	if status != http.StatusOK {
		t.Errorf("a cold transformed batch: %d %.300s; want 200", status, body)
	}
	t.Logf("a cold transformed batch answered in %s", took.Round(time.Millisecond))
	status, body, took = ask(http.MethodPost, "/jobs/other/exclude?"+job, `{"from_step": 1, "keys": ["`+key+`"]}`)
	if status != http.StatusCreated {
		t.Errorf("the other client's edit: %d %s; want 201", status, body)
	}
	t.Logf("the other client's edit answered in %s", took.Round(time.Millisecond))
}
