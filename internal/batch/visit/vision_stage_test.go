package visit_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
	"github.com/brandgw/brand/internal/testsupport/visiontest"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/vision"
)

// TestVisionSequences: a WebDataset of image-text samples indexed with
// `brand index --tokenizer`'s facts (dataset.WriteVisionFacts) is served
// as a vision job through the stages a node wires (its store, cache,
// reader, pack stage and visit). Its epoch counts the sequences as
// vision.NewEpoch packs the test's own item of each sample (its tokens
// expanded here, its images counted by the rule); each sequence of the
// first two global batches at world 2 holds those samples, token for
// token as the test expands them (input_ids, loss_mask, position_ids),
// with each image's span and size, and its members byte for byte what
// the library's Reader and Writer make of the samples (images resized by
// transform's resampler, held to Pillow in package vision). A dataset
// without facts, and pack=concat, are the gateway's (400 saying why:
// TestVisionRefusedOverHTTP), a vision job's /plan the table's. The
// rest of the epoch, a resume at another world size, balance= and
// mixtures are the layout's (internal/batch/layout's TestVisionMixture,
// TestVisionSchedule, TestVisionBalance, TestVisionBadSamples), the
// model's vision rounds (gateway's TestModel) through HTTP; Parquet
// served in place, and a cluster, integration's TestVisionParquetOnMinIO.
func TestVisionSequences(t *testing.T) {
	ctx := context.Background()
	tok, enc, st := visiontest.Store(t)
	corpus := visiontest.Corpus(t, st, 4, 16)
	res, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	if _, err := dataset.WriteVisionFacts(ctx, st, ix, tok, 0, 2); err != nil {
		t.Fatal(err)
	}
	s := stagetest.New(t, stagetest.Config{Datasets: []stagetest.Spec{{Name: "test", URL: "file:///fixture", Store: st}}})

	const seq, seed, window = 512, 42, 2
	v := enc.VocabSize()
	ruleText := fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d,images:4", v, v+1, v+2)
	r, err := vision.ParseRule(ruleText)
	if err != nil {
		t.Fatal(err)
	}
	job := url.Values{"seq": {strconv.Itoa(seq)}, "vision": {ruleText}, "seed": {strconv.Itoa(seed)}, "window": {strconv.Itoa(window)}}

	// The test's expectation: each sample's IDs and loss, its item, the
	// epoch's order of the index's samples, packed by the library.
	n := ix.NumSamples()
	ids, loss := make([][]int32, n), make([][]uint8, n)
	items := make([]vision.Item, n)
	m2 := uint64(r.Merge * r.Merge)
	for id := range n {
		m := corpus[ix.SampleKey(id)]
		ids[id], loss[id] = m.Expand(t, r, enc)
		items[id] = vision.Item{Tokens: len(ids[id]), Images: len(m.Sizes)}
		for _, s := range m.Sizes {
			w, h, _ := r.Size(s[0], s[1])
			p := uint64(r.Tokens(w, h)) * m2
			items[id].Encoder += p * p
			items[id].Vision += r.Tokens(w, h)
		}
	}
	order, err := shuffle.NewEpoch(ix.SampleCounts(), seed, 0, window)
	if err != nil {
		t.Fatal(err)
	}
	want, err := vision.NewEpoch(order, func(id int) vision.Item { return items[id] }, seq, r.MaxImages, seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, n)
	for i := range want.NumSequences() {
		for _, id := range want.Sequence(i).Samples {
			seen[id]++
		}
	}
	if slices.ContainsFunc(seen, func(c int) bool { return c != 1 }) || want.NumSequences() < 8 {
		t.Fatalf("the expected epoch holds samples %v times over %d sequences; want each once over 8 or more", seen, want.NumSequences())
	}

	// The library's own members of each expected sequence.
	rd := &vision.Reader{Rule: r, Encoder: enc}
	wr := &vision.Writer{Seq: seq, Images: transform.Options{}}
	libraryMembers := func(pos int) map[string][]byte {
		var samples []vision.Sample
		for _, id := range want.Sequence(pos).Samples {
			s, err := rd.Read(ix.SampleKey(id), corpus[ix.SampleKey(id)].Tar)
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, s)
		}
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		if err := wr.Write(tw, "k", samples); err != nil {
			t.Fatal(err)
		}
		_ = tw.Close()
		return stagetest.Samples(t, b.Bytes())[0].Files
	}

	check := func(key string, files map[string][]byte) int {
		t.Helper()
		parts := strings.Split(key, "/")
		pos, err := strconv.Atoi(parts[len(parts)-1])
		if len(parts) != 3 || parts[0] != "seq" || parts[1] != "0" || err != nil || pos >= want.NumSequences() {
			t.Fatalf("a sequence keyed %q", key)
		}
		q := want.Sequence(pos)
		var wantIDs, wantPos []int32
		var wantLoss []uint8
		for _, id := range q.Samples {
			wantIDs = append(wantIDs, ids[id]...)
			wantLoss = append(wantLoss, loss[id]...)
			for i := range ids[id] {
				wantPos = append(wantPos, int32(i))
			}
		}
		for i := range seq - len(wantIDs) {
			wantIDs, wantLoss, wantPos = append(wantIDs, 0), append(wantLoss, 0), append(wantPos, int32(i))
		}
		if got := visiontest.Int32s(t, files["input_ids.npy"]); !slices.Equal(got, wantIDs) {
			t.Fatalf("sequence %d: input_ids\n%v\nwant (samples %v)\n%v", pos, got, q.Samples, wantIDs)
		}
		if got := visiontest.Int32s(t, files["position_ids.npy"]); !slices.Equal(got, wantPos) {
			t.Fatalf("sequence %d: position_ids %v; want %v", pos, got, wantPos)
		}
		if _, got, err := npy.Read(files["loss_mask.npy"]); err != nil || !bytes.Equal(got, wantLoss) {
			t.Fatalf("sequence %d: loss_mask %v (%v); want %v", pos, got, err, wantLoss)
		}
		spans := visiontest.Int32s(t, files["image_spans.npy"])
		for k := 0; k < len(spans); k += 2 {
			start, l := int(spans[k]), int(spans[k+1])
			if start < 1 || wantIDs[start-1] != r.Start || wantIDs[start+l] != r.End || slices.ContainsFunc(wantIDs[start:start+l], func(x int32) bool { return x != r.Image }) {
				t.Fatalf("sequence %d: image span (%d, %d) is not an image's placeholders", pos, start, l)
			}
		}
		lib := libraryMembers(pos)
		if len(lib) != len(files) {
			t.Fatalf("sequence %d: %d members; the library writes %d", pos, len(files), len(lib))
		}
		for name, b := range lib {
			if !bytes.Equal(files[name], b) {
				t.Fatalf("sequence %d: member %s differs from the library's", pos, name)
			}
		}
		return pos
	}

	// The epoch, and the first two global batches at world 2.
	w2 := url.Values{}
	for k, x := range job {
		w2[k] = x
	}
	w2.Set("batch_size", "2")
	w2.Set("world", "2")
	info, err := s.Epoch(ctx, w2.Encode(), 0)
	if err != nil || info.Samples != want.NumSequences() || info.Tokens == nil || info.Tokens.Documents != n {
		t.Fatalf("epoch 0: %+v %v; want %d sequences of %d samples", info, err, want.NumSequences(), n)
	}
	served := map[int]int{}
	for m := range 2 {
		for rank := range 2 {
			w2.Set("rank", strconv.Itoa(rank))
			_, body, err := s.Batch(ctx, w2.Encode(), 0, uint64(m))
			if err != nil {
				t.Fatalf("batch %d rank %d: %v", m, rank, err)
			}
			for _, s := range stagetest.Samples(t, body) {
				served[check(s.Key, s.Files)]++
			}
		}
	}
	if len(served) != 8 {
		t.Fatalf("two global batches of 4 served sequences %v", served)
	}
}

// TestVisionTruncatedPixels: a sample whose PNG header reads but whose
// pixel data is cut short is laid out (its facts, from the header, are a
// good sample's) and fails only when its sequence is written. Under
// --on-bad-image=fail its batch is a 422 naming the member; under skip
// its batch is served without it — its sequence written without its
// tokens and image, the sample named (Brand-Missing-Keys) as a transform
// job's bad image is — where it was a 422 that stalled a training loop at
// that step.
func TestVisionTruncatedPixels(t *testing.T) {
	ctx := context.Background()
	tok, enc, st := visiontest.Store(t)
	corpus := visiontest.Corpus(t, st, 1, 10)
	im := image.NewNRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			im.SetNRGBA(x, y, color.NRGBA{uint8(x * 37), uint8(y * 91), uint8(x * y), 255})
		}
	}
	var whole bytes.Buffer
	if err := png.Encode(&whole, im); err != nil {
		t.Fatal(err)
	}
	cut := whole.Bytes()[:whole.Len()/2] // the header reads, the pixels do not
	var bad bytes.Buffer
	tw := tar.NewWriter(&bad)
	for _, m := range []struct {
		name string
		data []byte
	}{{"bad/x0.png", cut}, {"bad/x0.txt", []byte("<image> zebra crossing")}} {
		_ = tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(m.data)
	}
	_ = tw.Close()
	if _, err := st.Put(ctx, "shards/bad.tar", bytes.NewReader(bad.Bytes()), int64(bad.Len())); err != nil {
		t.Fatal(err)
	}
	res, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.WriteVisionFacts(ctx, st, res.Index, tok, 0, 2); err != nil {
		t.Fatal(err)
	}
	v := enc.VocabSize()
	q := url.Values{"seq": {"512"}, "batch_size": {"2"}, "vision": {fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d", v, v+1, v+2)}}
	zebra, err := enc.Encode([]byte(" zebra crossing"))
	if err != nil {
		t.Fatal(err)
	}
	wantImages := 0
	for _, m := range corpus {
		wantImages += len(m.Sizes)
	}
	// Every batch of the epoch, by policy: the one holding the sample,
	// and the images and texts served.
	walk := func(skip bool) (failed []error, missing string, images int) {
		t.Helper()
		s := stagetest.New(t, stagetest.Config{Datasets: []stagetest.Spec{{Name: "test", URL: "file:///fixture", Store: st}}, SkipBadImages: skip})
		info, err := s.Epoch(ctx, q.Encode(), 0)
		if err != nil || info.Tokens == nil || info.Tokens.Documents != len(corpus)+1 {
			t.Fatalf("epoch 0: %+v %v; want the %d samples laid out, the truncated one among them", info, err, len(corpus)+1)
		}
		for m, b := range s.EpochBatches(t, q.Encode(), 0) {
			if b.Err != nil {
				failed = append(failed, b.Err)
				continue
			}
			if len(b.Batch.MissingKeys) > 0 {
				missing += strings.Join(b.Batch.MissingKeys, ",")
				if len(b.Batch.Missing) != 1 {
					t.Errorf("batch %d: %d missing naming %q; want 1", m, len(b.Batch.Missing), b.Batch.MissingKeys)
				}
			}
			for _, s := range stagetest.Samples(t, b.Body) {
				ids := visiontest.Int32s(t, s.Files["input_ids.npy"])
				images += len(visiontest.Int32s(t, s.Files["image_spans.npy"])) / 2
				if bytes.Contains(int32Bytes(ids), int32Bytes(zebra)) {
					t.Errorf("batch %d: sequence %s holds the skipped sample's text", m, s.Key)
				}
			}
		}
		return failed, missing, images
	}
	if failed, _, _ := walk(false); len(failed) != 1 || stagetest.Status(failed[0]) != http.StatusUnprocessableEntity || !strings.Contains(stagetest.Message(failed[0]), "bad/x0.png") {
		t.Fatalf("fail: batches not served %q; want one 422 naming bad/x0.png", failed)
	}
	failed, missing, images := walk(true)
	if len(failed) != 0 {
		t.Fatalf("skip: batches not served %q; want every one, the truncated sample skipped", failed)
	}
	if missing != "bad/x0" {
		t.Errorf("skip: the missing keys named %q; want bad/x0", missing)
	}
	if images != wantImages {
		t.Errorf("skip: the epoch's sequences hold %d images; the good samples have %d", images, wantImages)
	}
}

// int32Bytes is ids as little-endian bytes, for a search of one run of
// tokens in another.
func int32Bytes(ids []int32) []byte {
	b := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
	return b
}
