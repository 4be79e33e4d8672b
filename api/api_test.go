package api

import (
	"net/url"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

func TestJobValues(t *testing.T) {
	tests := []struct {
		name string
		job  Job
		want string
	}{
		{"zero job leaves the gateway's defaults", Job{}, "drop_last=false&seed=0"},
		{"every field", Job{Dataset: "in", Params: shuffle.Params{Seed: 7, Window: 4, BatchSize: 64, World: 8, Rank: 3, DropLast: true, Offset: 640}},
			"batch_size=64&dataset=in&drop_last=true&offset=640&rank=3&seed=7&window=4&world=8"},
		{"rank alone implies world 1", Job{Params: shuffle.Params{Rank: 2}}, "drop_last=false&rank=2&seed=0&world=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.job.Values().Encode(); got != tt.want {
				t.Errorf("Values() = %q, want %q", got, tt.want)
			}
			q, _ := url.ParseQuery(tt.want)
			for k := range q {
				known := false
				for _, p := range JobParams {
					known = known || p == k
				}
				if !known {
					t.Errorf("Values() wrote %q, which JobParams does not list", k)
				}
			}
		})
	}
}
