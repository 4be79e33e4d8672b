package client_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// benchSample is a 64 KiB image-like sample with a label.
func benchSample(id, chunk int) fakeSample {
	return fakeSample{key: fmt.Sprintf("train/c%03d/%06d", chunk, id), members: []fakeMember{
		{"jpg", bytes.Repeat([]byte{byte(id)}, 64<<10)},
		{"cls", []byte(fmt.Sprint(id % 1000))},
	}}
}

func BenchmarkDecodeSamples(b *testing.B) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range 256 {
		s := benchSample(i, 0)
		for _, m := range s.members {
			tw.WriteHeader(&tar.Header{Name: s.key + "." + m.ext, Mode: 0o644, Size: int64(len(m.data))})
			tw.Write(m.data)
		}
	}
	tw.Close()
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		samples, err := client.DecodeSamples(bytes.NewReader(data))
		if err != nil || len(samples) != 256 {
			b.Fatal(len(samples), err)
		}
	}
}

// BenchmarkEpoch reads a 16 MiB epoch (256 samples, batches of 32) from an
// in-process fake gateway, with and without read-ahead. On loopback the
// fake answers at once, so this measures the client's own cost per byte;
// read-ahead pays off against real latency. Releasing each batch lets the
// client reuse its memory.
func BenchmarkEpoch(b *testing.B) {
	gw := startFakeGatewayWith(newFakeDataset("bench", []int{32, 32, 32, 32, 32, 32, 32, 32}, benchSample))
	defer gw.Close()
	var epochBytes int64
	for _, s := range gw.datasets["bench"].samples {
		epochBytes += int64(len(s.tar))
	}
	for _, tc := range []struct {
		ahead   int
		release bool
	}{{-1, false}, {2, false}, {4, false}, {2, true}} {
		ahead := tc.ahead
		name := fmt.Sprintf("ahead=%d", ahead)
		if tc.release {
			name += ",release"
		}
		b.Run(name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c, err := client.New(gw.URL, client.Options{HTTPClient: &http.Client{Transport: tr}, Ahead: ahead, Job: api.Job{Params: shuffle.Params{BatchSize: 32}}})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(epochBytes)
			b.ReportAllocs()
			epoch := 0
			for b.Loop() {
				n := 0
				for batch, err := range c.Epoch(context.Background(), epoch) {
					if err != nil {
						b.Fatal(err)
					}
					n += len(batch.Samples)
					if tc.release {
						batch.Release()
					}
				}
				if n != 256 {
					b.Fatalf("%d samples; want 256", n)
				}
				epoch++
			}
		})
	}
}
