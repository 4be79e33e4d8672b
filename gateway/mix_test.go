package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

// TestMixtureOverHTTP is the mixture's HTTP contract with three datasets
// of 300, 120 and 20 samples at weights 0.5, 0.3, 0.2, batch 8 × world 4:
// /epoch describes the mixture (its components, block and length), each
// batch's Brand-Mix-Components header names each sample's component, the
// bytes are the sources', and /stats and /metrics count each component's
// samples. What the batches hold — weights, passes, resuming at another
// world size — is internal/batch/layout's TestMixtureContract and
// TestMixtureResumeAtAnotherWorldSize.
func TestMixtureOverHTTP(t *testing.T) {
	m := gatewaytest.NewMix(t)
	base := m.Start(t)
	const world = 4
	resp, body := get(t, fmt.Sprintf("%s/epoch/0?mix=%s&world=%d", base, gatewaytest.MixWeights, world))
	var e0 api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &e0) != nil {
		t.Fatalf("epoch info: %d %s", resp.StatusCode, body)
	}
	if e0.Samples != 448 || e0.Batches != 14 || e0.Mix == nil || e0.Mix.Block != 32 || len(e0.Mix.Components) != 3 {
		t.Fatalf("epoch info %+v", e0)
	}
	served := make([]int, 3)
	for b := range e0.Batches {
		for r := range world {
			got, _ := m.Read(t, fmt.Sprintf("%s/epoch/0/batch/%d?mix=%s&world=%d&rank=%d", base, b, gatewaytest.MixWeights, world, r))
			if len(got) != 8 {
				t.Fatalf("batch %d rank %d: %d samples", b, r, len(got))
			}
			for _, s := range got {
				served[s.Comp]++
			}
		}
	}

	// /stats and /metrics count each component.
	resp, body = get(t, base+"/stats")
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
	var st struct {
		Mixtures []api.MixStat `json:"mixtures"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Mixtures) != 1 || st.Mixtures[0].Mix != gatewaytest.MixWeights {
		t.Fatalf("stats mixtures %+v", st.Mixtures)
	}
	for i, c := range st.Mixtures[0].Components {
		if c.Dataset != m.Names[i] || c.Samples != int64(served[i]) || c.BackendBytes <= 0 {
			t.Fatalf("stats component %d: %+v (served %d)", i, c, served[i])
		}
	}
	_, metrics := get(t, base+"/metrics")
	for i, name := range m.Names {
		if !strings.Contains(string(metrics), fmt.Sprintf(`brand_mix_samples_total{dataset=%q} %d`, name, served[i])) {
			t.Fatalf("metrics lack %s's mixture samples", name)
		}
	}
}

// TestMixtureErrors: malformed mixtures and schedules, and parameters
// that do not apply, are refused with the status that says why (and a
// dataset not served named); the words of each refusal are api's
// TestParseMix and TestParseScheduleSaysWhy and internal/job/query's TestParse.
func TestMixtureErrors(t *testing.T) {
	m := gatewaytest.NewMix(t)
	base := m.Start(t)
	for _, tc := range []struct {
		query  string
		status int
		says   string
	}{
		{"mix=web:0.5,nope:0.5", http.StatusNotFound, "nope"},
		{"mix=web:0.5,web:0.5", http.StatusBadRequest, ""},
		{"mix=web:x", http.StatusBadRequest, ""},
		{"mix=web:1&dataset=web", http.StatusBadRequest, ""},
		{"mix_block=8", http.StatusBadRequest, ""},
		{"mix=web:1&sampling=importance&job=j", http.StatusBadRequest, ""},
		{"mix=web:1,code:1&mix_block=0", http.StatusBadRequest, ""},
		{"mix=web:1,code:1.100001&mix_block=1&mix_samples=4194304", http.StatusBadRequest, ""}, // past shuffle.MaxMixWork: internal/batch/layout's TestMixtureRequestsBounded
		{"mix_schedule=" + url.QueryEscape("0:web:1;9:web:2;4:web:1"), http.StatusBadRequest, "increasing step order"},
		{"mix_schedule=" + url.QueryEscape("0:web:1,nope:1"), http.StatusNotFound, "nope"},
		{"mix_schedule=0:web:1&mix=web:1", http.StatusBadRequest, "a job reads one source"},
	} {
		resp, body := get(t, base+"/epoch/0/batch/0?"+tc.query)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("?%s: %d %.200s; want %d saying %q", tc.query, resp.StatusCode, body, tc.status, tc.says)
		}
	}
	resp, body := get(t, base+"/epoch/0/batch/14?mix="+gatewaytest.MixWeights+"&world=4")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("batch past the end: %d %s", resp.StatusCode, body)
	}
	// A manifest names each sample's dataset.
	resp, body = get(t, base+"/epoch/0/batch/0/manifest?mix="+gatewaytest.MixWeights)
	var man api.Manifest
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &man) != nil || len(man.Samples) != 8 {
		t.Fatalf("manifest: %d %s", resp.StatusCode, body)
	}
	for _, s := range man.Samples {
		if !strings.HasPrefix(s.Key, s.Dataset+"-") {
			t.Fatalf("manifest sample %+v", s)
		}
	}
	// HEAD knows the length without reading.
	resp, _ = do(t, http.MethodHead, base+"/epoch/0/batch/0?mix="+gatewaytest.MixWeights, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderMixBlock) != "8" || resp.ContentLength != man.Bytes {
		t.Fatalf("HEAD: %d block %q length %d (manifest %d)", resp.StatusCode, resp.Header.Get(api.HeaderMixBlock), resp.ContentLength, man.Bytes)
	}
	etag := resp.Header.Get("ETag")
	resp, _ = get(t, base+"/epoch/0/batch/0?mix="+gatewaytest.MixWeights, "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", resp.StatusCode)
	}
}
