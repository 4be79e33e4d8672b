package chunkindex_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/brandgw/brand/chunkindex"
)

// Pack two samples into a chunk, index it, and serve a "batch" of the two in
// reverse order as a tar built only from byte ranges of the chunk.
func Example() {
	var chunk bytes.Buffer
	w := chunkindex.NewChunkWriter(&chunk)
	for _, key := range []string{"train/cat", "train/dog"} {
		img, label := "<"+key+" pixels>", key[6:]
		_, _, _, err := w.WriteSample(key, []chunkindex.Member{
			{Name: key + ".jpg", Size: int64(len(img)), Body: strings.NewReader(img)},
			{Name: key + ".cls", Size: int64(len(label)), Body: strings.NewReader(label)},
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	// Index the chunk as `brand index` would index any WebDataset shard.
	var samples []chunkindex.Sample
	size, err := chunkindex.ScanTar(bytes.NewReader(chunk.Bytes()), func(s chunkindex.TarSample) error {
		samples = append(samples, chunkindex.Sample{Key: s.Key, Chunk: 0, Offset: s.Offset, Length: s.Length, CRC: s.CRC})
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ix, err := chunkindex.New([]chunkindex.Chunk{{Key: "shard-000000.tar", Size: size, Samples: len(samples)}}, samples)
	if err != nil {
		log.Fatal(err)
	}
	enc, _ := ix.MarshalBinary()
	ix, err = chunkindex.Decode(enc)
	if err != nil {
		log.Fatal(err)
	}

	// Serve sample "train/dog" then "train/cat" by copying byte ranges.
	var batch bytes.Buffer
	for _, key := range []string{"train/dog", "train/cat"} {
		id, _, _ := ix.Lookup(context.Background(), key)
		_, off, n, _ := ix.SampleRange(id)
		batch.Write(chunk.Bytes()[off : off+n])
	}
	batch.Write(chunkindex.EndOfArchive[:])

	tr := tar.NewReader(&batch)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		fmt.Printf("%s %s\n", hdr.Name, body)
	}
	// Output:
	// train/dog.jpg <train/dog pixels>
	// train/dog.cls dog
	// train/cat.jpg <train/cat pixels>
	// train/cat.cls cat
}
