package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/s3backend"
)

// TestMemoryBudget: a gateway given a memory limit fits its parts to it
// (/stats "memory": the cache, the rest, copies and decodes sum to the
// limit); an image whose decode needs more than its decodes part is one
// it cannot transform — 422 naming it, or left out and named with
// --on-bad-image=skip — where a small one in the same dataset is served;
// and a limit with no room beside the cache is refused at start.
func TestMemoryBudget(t *testing.T) {
	const mib = 1 << 20
	f := newImageFixture(t, 1, 2, func(id int) (string, []byte) {
		w, h := 40, 30
		if id == 1 {
			w, h = 2400, 2000 // about 22 MB to decode with image/jpeg
		}
		p, err := photos.Sized(3, id, w, h, 90)
		if err != nil {
			t.Fatal(err)
		}
		return "jpg", p.JPEG
	})
	limit := int64(16*mib + 256*mib + 32*mib)
	budget := func(c *gateway.Config) { c.CacheSize, c.MemoryLimit = 16*mib, limit }
	_, url := startTransforms(t, f, budget)
	resp, body := get(t, url+"/stats")
	var st struct {
		Memory api.MemoryStats `json:"memory"`
	}
	if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/stats: %d %v", resp.StatusCode, err)
	}
	shares := map[string]int64{}
	var sum int64
	for _, p := range st.Memory.Shares {
		shares[p.Share] = p.Bytes
		sum += p.Bytes
	}
	if st.Memory.Limit != limit || sum != limit || shares["cache"] != 16*mib || shares["decodes"] != 16*mib || shares["copies"] != 16*mib {
		t.Fatalf("memory %+v, want shares summing to %d: a 16 MiB cache, 256 MiB, 16 MiB each of copies and decodes", st.Memory, limit)
	}
	key := func(id int) string {
		for k, i := range f.ids {
			if i == id {
				return k
			}
		}
		return ""
	}
	resp, body = get(t, url+"/epoch/0/batch/0?batch_size=2&transform=plain")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), key(1)) || !strings.Contains(string(body), "memory for decodes") {
		t.Errorf("an image over the decodes part: %d %s", resp.StatusCode, body)
	}
	_, skipURL := startTransforms(t, f, func(c *gateway.Config) { budget(c); c.OnBadImage = gateway.OnDamagedSkip })
	resp, body = get(t, skipURL+"/epoch/0/batch/0?batch_size=2&transform=plain")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderMissingKeys) != key(1) || len(tensorsOf(t, body)) != 1 {
		t.Errorf("skip: %d, missing %q, %d samples; want the small one served and the large one named", resp.StatusCode, resp.Header.Get(api.HeaderMissingKeys), len(tensorsOf(t, body)))
	}
	_, err := gateway.New(gateway.Config{Datasets: []gateway.DatasetSpec{{Name: "test", Store: s3backend.Store(f.store)}}, CacheSize: 16 * mib, MemoryLimit: 256 * mib})
	if err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Errorf("a limit below the cache and the rest: %v", err)
	}
}
