package client_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
)

// TestImportanceThroughTheClient runs the loop a trainer does with the
// client (moved down from gateway's tests, whose importance contract
// stays there): an epoch read on two ranks, its losses fed back by key,
// rank 0 sealing, rank 1 waiting for the seal, and the next epoch drawn
// from it: the samples the ranks read are the importance epoch's, as the
// gateway's manifests of it name them.
func TestImportanceThroughTheClient(t *testing.T) {
	g := startMixGateway(t) // the plain job reads web, 300 samples
	const samples = 300
	ctx := t.Context()
	clients := make([]*client.Client, 2)
	for r := range clients {
		opts := client.Options{}
		opts.Job.Importance.Job = "c"
		opts.Job.BatchSize = 8
		opts.Job.World, opts.Job.Rank = 2, r
		clients[r] = newMixClient(t, g.URL, opts)
	}
	for r, c := range clients {
		for b, err := range c.Epoch(ctx, 0) {
			if err != nil {
				t.Fatal(err)
			}
			keys := make([]string, len(b.Samples))
			losses := make([]float32, len(b.Samples))
			for i, s := range b.Samples {
				keys[i] = s.Key
				losses[i] = float32(len(s.Files["jpg"])%7) + float32(r)
			}
			if err := c.Feedback(ctx, 0, keys, losses); err != nil {
				t.Fatal(err)
			}
			b.Release()
		}
	}
	done := make(chan string, 1)
	go func() {
		v, err := clients[1].WaitSealed(ctx, 0)
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	sealed, err := clients[0].Seal(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if sealed.Reported != samples {
		t.Fatalf("sealed %+v, want all %d samples reported", sealed, samples)
	}
	if v := <-done; v != sealed.Version {
		t.Fatalf("rank 1 waited for %q, rank 0 sealed %q", v, sealed.Version)
	}
	var got []string
	for _, c := range clients {
		c.SetImportance(sealed.Version)
		for b, err := range c.Epoch(ctx, 1) {
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Samples {
				got = append(got, s.Key)
			}
			b.Release()
		}
	}
	var want []string
	for r := range 2 {
		q := fmt.Sprintf("seed=0&batch_size=8&world=2&rank=%d&sampling=importance&job=c&importance=%s", r, sealed.Version)
		for m, batches := 0, 1; m < batches; m++ {
			man := manifest(t, fmt.Sprintf("%s/epoch/1/batch/%d/manifest?%s", g.URL, m, q))
			for _, s := range man.Samples {
				want = append(want, s.Key)
			}
			batches = man.Batches
		}
	}
	if !slices.Equal(got, want) || len(got) != samples {
		t.Fatalf("the clients read %d samples, not the importance epoch's %d", len(got), len(want))
	}
}

// manifest GETs a batch's manifest.
func manifest(t *testing.T, url string) api.Manifest {
	t.Helper()
	_, b := getOK(t, url)
	var man api.Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return man
}

// getOK GETs url, which must answer 200, and returns the response and
// its body, read whole.
func getOK(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %s (%v)", url, resp.Status, b, err)
	}
	return resp, b
}
