package catalogtest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/s3backend"
)

// File is one member of a packed sample: its extension and bytes.
type File struct {
	Ext  string
	Data []byte
}

// Pack writes a dataset of tar chunks to st as `brand pack` lays one
// out: chunk c, the object chunks/%06d.tar, holds counts[c] samples,
// sample id (numbered across chunks) being sample(id, c)'s key and
// members in tar order; the index over them is written last, as a
// packer writes it, and returned. A test that serves the dataset (the
// gateway's, stagetest's) reads these bytes from st.
func Pack(t testing.TB, st s3backend.Store, counts []int, sample func(id, c int) (key string, files []File)) *chunkindex.Index {
	t.Helper()
	ctx := context.Background()
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	id := 0
	for c, perChunk := range counts {
		var buf bytes.Buffer
		w := chunkindex.NewChunkWriter(&buf)
		for range perChunk {
			key, files := sample(id, c)
			var members []chunkindex.Member
			for _, f := range files {
				members = append(members, chunkindex.Member{Name: key + "." + f.Ext, Size: int64(len(f.Data)), Body: bytes.NewReader(f.Data)})
			}
			off, n, crc, err := w.WriteSample(key, members)
			if err != nil {
				t.Fatal(err)
			}
			ss = append(ss, chunkindex.Sample{Key: key, Chunk: c, Offset: off, Length: n, CRC: crc})
			id++
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("chunks/%06d.tar", c)
		info, err := st.Put(ctx, name, bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, chunkindex.Chunk{Key: name, Size: info.Size, ETag: info.ETag, Samples: perChunk})
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, chunkindex.IndexKey, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	return ix
}

// Members are a packed dataset's samples' bytes: key → extension →
// bytes, what a served batch is compared against.
type Members map[string]map[string][]byte

// PackClasses is Pack of an image-classification dataset of the shape
// the gateway's and the batch stages' tests serve: sample id's key is
// prefix+"classC/sampleNNNNN" (C = id%3, N = id), its members cls (the
// text prefix+C) and jpg, the three bytes id, id>>8 and its chunk
// repeated 100 to 999 times (300 to 2,700 bytes; about size bytes if size
// is not 0). It returns the index and every sample's members.
func PackClasses(t testing.TB, st s3backend.Store, prefix string, counts []int, size int) (*chunkindex.Index, Members) {
	t.Helper()
	members := Members{}
	ix := Pack(t, st, counts, func(id, c int) (string, []File) {
		key := fmt.Sprintf("%sclass%d/sample%05d", prefix, id%3, id)
		reps := 100 + (id*37)%900
		if size > 0 {
			reps = size/3 + id%7
		}
		img := bytes.Repeat([]byte{byte(id), byte(id >> 8), byte(c)}, reps)
		cls := []byte(fmt.Sprint(prefix, id%3))
		members[key] = map[string][]byte{"jpg": img, "cls": cls}
		return key, []File{{"cls", cls}, {"jpg", img}}
	})
	return ix, members
}
