package gateway_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// TestVisionTruncatedPixelsOverHTTP: a sample whose PNG header reads but
// whose pixel data is cut short is laid out (its facts, from the header,
// are a good sample's) and fails only when its sequence is written. Under
// --on-bad-image=fail its batch is 422 naming the member; under skip its
// batch is served without it — its sequence written without its tokens
// and image, the sample named in Brand-Missing-Keys as a transform job's
// bad image is — where it was a 422 that stalled a training loop at that
// step.
func TestVisionTruncatedPixelsOverHTTP(t *testing.T) {
	ctx := context.Background()
	tok, enc, st := visionStore(t)
	corpus := visionCorpus(t, st, 1, 10)
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
	putFile(t, st, "shards/bad.tar", bad.Bytes())
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
		wantImages += len(m.sizes)
	}
	// Every batch of the epoch, by policy: the one holding the sample,
	// and the images and texts served.
	walk := func(srv string) (failed []string, missing string, images int) {
		t.Helper()
		resp, body := get(t, srv+"/epoch/0?"+q.Encode())
		var info api.EpochInfo
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Tokens == nil || info.Tokens.Documents != len(corpus)+1 {
			t.Fatalf("/epoch/0: %s %s; want the %d samples laid out, the truncated one among them", resp.Status, body, len(corpus)+1)
		}
		for m := range info.Batches {
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srv, m, q.Encode()))
			if resp.StatusCode != http.StatusOK {
				failed = append(failed, fmt.Sprintf("%d %s", resp.StatusCode, body))
				continue
			}
			if k := resp.Header.Get(api.HeaderMissingKeys); k != "" {
				missing += k
				if n := resp.Header.Get(api.HeaderMissingSamples); n != "1" {
					t.Errorf("batch %d: Brand-Missing-Samples %q naming %q; want 1", m, n, k)
				}
			}
			for _, s := range readTar(t, body) {
				ids := npyInt32s(t, s.files["input_ids.npy"])
				images += len(npyInt32s(t, s.files["image_spans.npy"])) / 2
				if bytes.Contains(int32s(ids), int32s(zebra)) {
					t.Errorf("batch %d: sequence %s holds the skipped sample's text", m, s.key)
				}
			}
		}
		return failed, missing, images
	}
	_, failing := start(t, st, nil)
	if failed, _, _ := walk(failing.URL); len(failed) != 1 || !strings.HasPrefix(failed[0], "422") || !strings.Contains(failed[0], "bad/x0.png") {
		t.Fatalf("fail: batches not served %q; want one 422 naming bad/x0.png", failed)
	}
	_, skipping := start(t, st, func(c *gateway.Config) { c.OnBadImage = gateway.OnDamagedSkip })
	failed, missing, images := walk(skipping.URL)
	if len(failed) != 0 {
		t.Fatalf("skip: batches not served %q; want every one, the truncated sample skipped", failed)
	}
	if missing != "bad/x0" {
		t.Errorf("skip: Brand-Missing-Keys named %q; want bad/x0", missing)
	}
	if images != wantImages {
		t.Errorf("skip: the epoch's sequences hold %d images; the good samples have %d", images, wantImages)
	}
}

// int32s is ids as little-endian bytes, for a search of one run of
// tokens in another.
func int32s(ids []int32) []byte {
	b := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
	return b
}

func putFile(t testing.TB, st *s3backend.Local, key string, b []byte) {
	t.Helper()
	if _, err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}
