package client_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"slices"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// Each example starts an in-process fake gateway (see fake_test.go) serving
// "toy", 20 samples in 5 chunks, in place of a real `brand serve`.

func Example() {
	gw := startFakeGateway()
	defer gw.Close()

	ctx := context.Background()
	c, err := client.New(gw.URL, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	datasets, err := c.Datasets(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range datasets {
		fmt.Printf("%s: %d samples in %d chunks (default %t)\n", d.Name, d.Samples, d.Chunks, d.Default)
	}
	s, err := c.Sample(ctx, "train/n02/img009")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s has %q, label %s\n", s.Key, slices.Sorted(maps.Keys(s.Files)), s.Files["cls"])
	// Output:
	// toy: 20 samples in 5 chunks (default true)
	// val: 7 samples in 2 chunks (default false)
	// train/n02/img009 has ["cls" "jpg" "meta.json"], label 9
}

func ExampleClient_Epoch() {
	gw := startFakeGateway()
	defer gw.Close()

	// Rank 1 of a 2-rank job: each global batch of 2×4 samples is split
	// between the ranks, and this worker sees its 4. The last global batch
	// holds the epoch's remaining 4 samples, all of them rank 0's, so rank
	// 1's share is empty (DropLast would drop that batch for both ranks).
	c, err := client.New(gw.URL, client.Options{Job: api.Job{Params: shuffle.Params{Seed: 42, BatchSize: 4, World: 2, Rank: 1}}})
	if err != nil {
		log.Fatal(err)
	}
	for b, err := range c.Epoch(context.Background(), 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("batch %d of %d: %q\n", b.Index, b.EpochBatches, keys(b.Samples))
	}
	// Output:
	// batch 0 of 3: ["train/n02/img011" "train/n02/img010" "train/n04/img018" "train/n02/img007"]
	// batch 1 of 3: ["train/n00/img000" "train/n01/img004" "train/n01/img006" "train/n00/img002"]
	// batch 2 of 3: []
}

func ExampleClient_Batch() {
	gw := startFakeGateway()
	defer gw.Close()

	c, err := client.New(gw.URL, client.Options{Job: api.Job{Params: shuffle.Params{Seed: 42, BatchSize: 3}}})
	if err != nil {
		log.Fatal(err)
	}
	// Any batch of any epoch can be fetched directly, for example to resume
	// a job at the step it stopped.
	b, err := c.Batch(context.Background(), 3, 5)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("epoch %d batch %d of %d, %d samples in the epoch\n", b.Epoch, b.Index, b.EpochBatches, b.EpochSamples)
	for _, s := range b.Samples {
		fmt.Printf("%s: %d bytes of jpg, label %s, %d files\n", s.Key, len(s.Files["jpg"]), s.Files["cls"], len(s.Files))
	}
	// Output:
	// epoch 3 batch 5 of 7, 20 samples in the epoch
	// train/n04/img015: 200 bytes of jpg, label 5, 3 files
	// train/n04/img016: 256 bytes of jpg, label 6, 2 files
	// train/n04/img019: 424 bytes of jpg, label 9, 2 files
}

func ExampleClient_EpochFrom() {
	gw := startFakeGateway()
	defer gw.Close()
	ctx := context.Background()
	job := api.Job{Params: shuffle.Params{Seed: 42, BatchSize: 4, World: 2}}

	// The 2-rank job of the Epoch example trains on batch 0 of epoch 0 and
	// stops. Its checkpoint records the offset to resume from: one global
	// batch of 2×4 samples.
	job.Rank = 1
	c, err := client.New(gw.URL, client.Options{Job: job})
	if err != nil {
		log.Fatal(err)
	}
	plan, err := c.EpochInfo(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	offset := client.ResumeOffset(plan, 1)
	fmt.Printf("resume epoch 0 at sample %d of %d\n", offset, plan.Samples)

	// It restarts on one rank with batches of 6 and reads the other 12
	// samples, in the epoch's order: positions 12 to 15 (the second and
	// third of batch 0, the first two of batch 1) are what rank 1 read as
	// its batch 1 in the Epoch example.
	one, err := client.New(gw.URL, client.Options{Job: api.Job{Params: shuffle.Params{Seed: 42, BatchSize: 6, World: 1}}})
	if err != nil {
		log.Fatal(err)
	}
	for b, err := range one.EpochFrom(ctx, 0, offset) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("batch %d of %d from %d: %q\n", b.Index, b.EpochBatches, b.Offset, keys(b.Samples))
	}
	// Output:
	// resume epoch 0 at sample 8 of 20
	// batch 0 of 2 from 8: ["train/n02/img009" "train/n04/img017" "train/n04/img016" "train/n00/img001" "train/n00/img000" "train/n01/img004"]
	// batch 1 of 2 from 8: ["train/n01/img006" "train/n00/img002" "train/n00/img003" "train/n01/img005" "train/n03/img013" "train/n03/img012"]
}

func ExampleOptions_peers() {
	// Three gateways started with the same --peers list: rank 2 of a
	// 3-rank job has its home on node 2 (the third by URL, as a cluster
	// sorts its members), which caches its samples.
	nodes := make([]*fakeGateway, 3)
	for k := range nodes {
		nodes[k] = startFakeGateway()
		defer nodes[k].Close()
	}
	slices.SortFunc(nodes, func(a, b *fakeGateway) int { return strings.Compare(a.URL, b.URL) })
	var peers []string
	for _, n := range nodes {
		peers = append(peers, n.URL)
	}
	name := func(url string) string { return fmt.Sprintf("node %d", slices.Index(peers, url)) }

	c, err := client.New("", client.Options{
		Peers: peers,
		Job:   api.Job{Params: shuffle.Params{Seed: 42, BatchSize: 2, World: 3, Rank: 2}},
		Ahead: -1, // one request at a time, so the output does not depend on timing
	})
	if err != nil {
		log.Fatal(err)
	}
	// The home dies after the first batch: the rest of the epoch comes
	// from the next node, with the same bytes any node would serve.
	for b, err := range c.Epoch(context.Background(), 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("batch %d from %s: %q\n", b.Index, name(b.Node), keys(b.Samples))
		if b.Index == 0 {
			nodes[2].srv.CloseClientConnections()
			nodes[2].Close()
		}
	}
	// Output:
	// batch 0 from node 2: ["train/n02/img011" "train/n02/img010"]
	// batch 1 from node 0: ["train/n04/img016" "train/n00/img001"]
	// batch 2 from node 0: ["train/n00/img003" "train/n01/img005"]
	// batch 3 from node 0: []
}

// A job over a mixture of three datasets reads each sample with the
// dataset it comes from. It stops after 5 batches, checkpointing the
// offset and the mixing block, and resumes on 3 ranks with both, reading
// the rest of the same order. (Not run: it needs a gateway serving web,
// code and books.)
func ExampleOptions_mixture() {
	ctx := context.Background()
	mix, err := api.ParseMix("web:0.5,code:0.3,books:0.2")
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New("http://brand:8080", client.Options{Job: api.Job{Mix: mix,
		Params: shuffle.Params{Seed: 7, BatchSize: 8, World: 4, Rank: 0}}})
	if err != nil {
		log.Fatal(err)
	}
	var offset int
	for b, err := range c.Epoch(ctx, 0) {
		if err != nil {
			log.Fatal(err)
		}
		for _, s := range b.Samples {
			fmt.Printf("%s: %s\n", s.Dataset, s.Key)
		}
		b.Release()
		// The offset after this step, from the plan the batch was read
		// under, which the loop keeps current.
		offset = client.ResumeOffset(b.Plan, b.Index+1)
		if b.Index == 4 {
			break
		}
	}
	// The order depends on the block, by default 8 × 4: the resumed job
	// must read with the same one.
	checkpoint := struct{ Offset, MixBlock int }{offset, c.MixBlock()}

	resumed, err := client.New("http://brand:8080", client.Options{Job: api.Job{Mix: mix, MixBlock: checkpoint.MixBlock,
		Params: shuffle.Params{Seed: 7, BatchSize: 8, World: 3, Rank: 0}}})
	if err != nil {
		log.Fatal(err)
	}
	for b, err := range resumed.EpochFrom(ctx, 0, checkpoint.Offset) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("batch %d from %d: %d samples\n", b.Index, b.Offset, len(b.Samples))
	}
}
