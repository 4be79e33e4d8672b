package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// TestExcludeClient: Client.Exclude stores a list under the job's name
// from a step; Client.Exclusion reads it back; the job's next epoch,
// read through the client, holds no listed sample and every other once;
// a list from a step read is refused with the first step a list could
// start at; a second list is refused naming the current version, and
// ExtendExclusion extends it.
func TestExcludeClient(t *testing.T) {
	g := startMixGateway(t)
	ctx := context.Background()
	c := newMixClient(t, g.URL, client.Options{Job: api.Job{Name: "run", Dataset: "web", Params: shuffle.Params{Seed: 5, BatchSize: 8, Window: 2, World: 1}}})
	var all []string
	for b, err := range c.Epoch(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Samples {
			all = append(all, s.Key)
		}
		b.Release()
	}
	_, err := c.Exclude(ctx, 1, []string{all[0]})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.FirstEditableStep == nil {
		t.Fatalf("a list from a step read: %v; want 409 naming the first step a list could start at", err)
	}
	from := *ae.FirstEditableStep
	listed := []string{all[3], all[len(all)-1]}
	x, err := c.Exclude(ctx, from, listed)
	if err != nil || x.Samples != 2 || x.Version == "" {
		t.Fatalf("Exclude: %+v, %v", x, err)
	}
	back, err := c.Exclusion(ctx)
	if err != nil || back.Version != x.Version || !slices.Equal(back.Keys, listed) {
		t.Fatalf("Exclusion: %+v, %v; want version %s with %v", back, err, x.Version, listed)
	}
	seen := map[string]int{}
	for b, err := range c.Epoch(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Samples {
			seen[s.Key]++
		}
		b.Release()
	}
	for _, k := range all {
		want := 1
		if slices.Contains(listed, k) {
			want = 0
		}
		if seen[k] != want {
			t.Fatalf("epoch 1: %s read %d times, want %d (%d samples)", k, seen[k], want, len(seen))
		}
	}
	if len(seen) != len(all)-2 {
		t.Fatalf("epoch 1: %d samples, want %d", len(seen), len(all)-2)
	}

	// A second list is refused naming the current version, which an
	// extension names.
	later := from + 2*uint64(len(all)/8)
	if _, err := c.Exclude(ctx, later, []string{all[5]}); !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.ExclusionVersion != x.Version {
		t.Fatalf("a second list: %v; want 409 naming version %s", err, x.Version)
	}
	y, err := c.ExtendExclusion(ctx, x.Version, later, []string{all[5]})
	if err != nil || y.Previous != x.Version || y.Samples != 3 {
		t.Fatalf("ExtendExclusion: %+v, %v", y, err)
	}
	if back, err := c.Exclusion(ctx); err != nil || back.Version != y.Version || !slices.Equal(back.Keys, append(slices.Clone(listed), all[5])) {
		t.Fatalf("Exclusion after the extension: %+v, %v", back, err)
	}
}
