package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/shuffle"
)

// startTokenGateway is a real gateway, in process, over three int32
// Megatron token datasets, web, code and books, of 120 documents each,
// indexed in place in chunks of about 8 KiB.
func startTokenGateway(t *testing.T) string {
	t.Helper()
	var specs []gateway.DatasetSpec
	for k, name := range []string{"web", "code", "books"} {
		st, err := megatrontest.Store(t.TempDir(), "int32", [][][]int64{megatrontest.Corpus(120, 200, 50000, uint64(60+k))},
			dataset.InPlaceOptions{Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: 8 << 10}})
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: st, Formats: []format.Format{megatron.Format{}}})
	}
	srv := httptest.NewServer(newGateway(t, specs))
	t.Cleanup(srv.Close)
	return srv.URL
}

// servedSequences is every sequence of an epoch of the token job q as
// the gateway serves its batches over HTTP, each written out with its
// key: what the client must read.
func servedSequences(t *testing.T, base, q string, epoch int) []string {
	t.Helper()
	var out []string
	for m, batches := 0, 1; m < batches; m++ {
		resp, body := getOK(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", base, epoch, m, q))
		var err error
		if batches, err = strconv.Atoi(resp.Header.Get(api.HeaderEpochBatches)); err != nil {
			t.Fatal(err)
		}
		samples, err := client.DecodeTar(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			ids, err := client.Int32s(s.Files[client.InputIDs])
			if err != nil {
				t.Fatal(err)
			}
			pos, err := client.Int32s(s.Files[client.PositionIDs])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(s.Key, ids, pos))
		}
	}
	return out
}

// TestTokensClient (moved down from gateway's token tests): the client
// reads a token job's epochs (Options.Job.Seq, Pack, EOS), one of a token
// schedule given with the job (Schedule) and one of a schedule stored
// under the job's name (ScheduleVersion) as the gateway serves them:
// Batch.Sequences views each batch's sequences as []int32, and EpochFrom
// resumes at an offset in sequences.
func TestTokensClient(t *testing.T) {
	base := startTokenGateway(t)
	const sched = "0:web:0.5,code:0.3,books:0.2;4:web:0.1,code:0.1,books:0.8;10~20:web:1,code:1,books:1"
	s, err := api.ParseSchedule(sched)
	if err != nil {
		t.Fatal(err)
	}
	putSchedule(t, base, http.MethodPut, sched, 0, "")
	p := shuffle.Params{Seed: 9, BatchSize: 4, Window: 2}
	for _, tc := range []struct {
		name, query string
		job         api.Job
		offset      int
	}{
		{"a token job", "dataset=web&seq=128&pack=concat&eos=3&batch_size=4&seed=9&window=2",
			api.Job{Params: p, Dataset: "web", Seq: 128, Pack: "concat", EOS: 3, EOSSet: true}, 12},
		{"Schedule", "seq=64&batch_size=4&seed=9&window=2&mix_block=8&mix_schedule=" + url.QueryEscape(sched),
			api.Job{Params: p, Seq: 64, MixBlock: 8, Schedule: s}, 24},
		{"ScheduleVersion", "seq=64&batch_size=4&seed=9&window=2&mix_block=8&job=run&schedule=latest",
			api.Job{Params: p, Seq: 64, MixBlock: 8, Name: "run", ScheduleVersion: "latest"}, 24},
	} {
		want := servedSequences(t, base, tc.query, 1)
		c := newMixClient(t, base, client.Options{Job: tc.job})
		read := func(offset int) []string {
			var got []string
			for b, err := range c.EpochFrom(context.Background(), 1, offset) {
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				seqs, err := b.Sequences()
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				for _, q := range seqs {
					got = append(got, fmt.Sprint(q.Key, q.InputIDs, q.PositionIDs))
				}
				b.Release()
			}
			return got
		}
		if got := read(0); !slices.Equal(got, want) {
			t.Errorf("%s: the client's epoch of %d sequences differs from the %d served", tc.name, len(got), len(want))
		}
		if got := read(tc.offset); !slices.Equal(got, want[tc.offset:]) {
			t.Errorf("%s: the client's epoch from offset %d differs from the sequences served", tc.name, tc.offset)
		}
	}
}
