package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/s3backend"
)

const (
	faceID     = "brandface"
	faceSecret = "face-secret-for-tests"
)

// s3Tool finds a client program the S3 face is tested with; with CI=true
// a missing one fails the test (scripts/ensure-s3-clients.sh installs
// them), elsewhere it skips.
func s3Tool(t *testing.T, what string, find func() (string, bool)) string {
	t.Helper()
	if p, ok := find(); ok {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is needed for this test (CI=true: failing); scripts/ensure-s3-clients.sh installs it", what)
	}
	t.Skipf("%s not found; scripts/ensure-s3-clients.sh installs it", what)
	return ""
}

func pythonWithBoto3() (string, bool) {
	py, err := pythontest.Find(context.Background(), nil, "boto3")
	return py, err == nil
}

func awsCLI() (string, bool) {
	for _, p := range []string{"aws", "/usr/bin/aws"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "--version").Run() == nil {
			return path, true
		}
	}
	return "", false
}

// TestS3FaceOnMinIO serves a dataset packed into MinIO through the S3
// face of a real `brand serve`, and reads it with the clients the field
// uses unchanged: boto3 lists, heads and gets every file byte for byte
// (ranges, conditionals, errors and presigned URLs as S3 answers them);
// the AWS CLI lists and copies a prefix; minio-go reads it; shards read
// through a read-through bucket come from the cache the second time. The
// same samples in the Hub's Parquet layout, served in place, are a
// bucket boto3 reads the same way.
func TestS3FaceOnMinIO(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	if err := srv.MakeBucket(ctx, "train"); err != nil {
		t.Fatal(err)
	}
	spec := synth.Spec{Samples: 400, MeanBytes: 6 << 10, Classes: 4, Seed: 5}
	src := filepath.Join(t.TempDir(), "src")
	if err := spec.WriteTree(src); err != nil {
		t.Fatal(err)
	}
	store, err := s3backend.Open(ctx, "s3://train/ds", srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 256 << 10, Shuffle: true, Seed: 3, Name: "ds"})
	if err != nil {
		t.Fatal(err)
	}
	chunks := res.Index.NumChunks()
	bin := cmdtest.Build(t, "brand")
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey, "AWS_REGION=us-east-1")

	// The same samples in the Hugging Face Hub's Parquet layout, served in
	// place (indexed to another prefix), and the files its bucket must
	// hold: each row's image and label, named by its file and row.
	hubStore, err := s3backend.Open(ctx, "s3://train/hub", srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	hubTree := filepath.Join(t.TempDir(), "hub")
	var hubBytes int64
	const hubFiles, hubRowGroup = 2, 50
	for k := range hubFiles {
		var recs []arrow.RecordBatch
		per := spec.Samples / hubFiles
		for lo := k * per; lo < (k+1)*per; lo += hubRowGroup {
			recs = append(recs, newRecord(hubSchema, func(b *array.RecordBuilder) {
				sb := b.Field(0).(*array.StructBuilder)
				for i := lo; i < lo+hubRowGroup; i++ {
					smp := spec.Sample(i)
					sb.Append(true)
					sb.FieldBuilder(0).(*array.BinaryBuilder).Append(smp.Image)
					sb.FieldBuilder(1).(*array.StringBuilder).Append(path.Base(smp.Key) + ".jpg")
					b.Field(1).(*array.Int64Builder).Append(int64(smp.Class))
					stem := filepath.Join(hubTree, fmt.Sprintf("data/train-%05d-of-%05d/%03d", k, hubFiles, i-k*per))
					if err := os.MkdirAll(filepath.Dir(stem), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(stem+".jpg", smp.Image, 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(stem+".cls", smp.Label(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}))
		}
		b := writeParquet(t, hubSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), recs...)
		putBytes(t, hubStore, fmt.Sprintf("data/train-%05d-of-%05d.parquet", k, hubFiles), b)
		hubBytes += int64(len(b))
	}
	runBrand(t, bin, env, "index", "--src", "s3://train/hub", "--dst", "s3://train/hub-index", "--s3-endpoint", srv.URL())

	dir := t.TempDir()
	credFile := filepath.Join(dir, "s3-credentials")
	if err := os.WriteFile(credFile, []byte("# the S3 face's keys\n"+faceID+" "+faceSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	face := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	proc := &clusterProc{url: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), logPath: filepath.Join(dir, "brand.log"),
		args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--dataset", "synth=s3://train/ds", "--dataset", "hub=s3://train/hub-index",
			"--s3-endpoint", srv.URL(), "--cache-size", "256MiB", "--cache-prefault=false", "--index-poll", "0",
			"--s3-face-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--s3-face-credentials", credFile,
			"--s3-face-bucket", "shards=s3://train/ds/chunks", "--log-format", "json"}}
	proc.start(t, bin, env)
	t.Cleanup(func() {
		proc.stop(t)
		if t.Failed() {
			t.Logf("gateway log:\n%s", tail(proc.logPath))
		}
	})
	storeReads := func() float64 {
		return scrape(t, proc.url, "brand_backend_read_bytes_total")["brand_backend_read_bytes_total"]
	}

	t.Run("boto3", func(t *testing.T) {
		py := s3Tool(t, "python3 with boto3", pythonWithBoto3)
		before := storeReads()
		cmd := exec.Command(py, filepath.Join("testdata", "s3face_boto3.py"), face, faceID, faceSecret, "synth", src)
		cmd.Env = append(os.Environ(), "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent", "AWS_EC2_METADATA_DISABLED=true")
		out, err := runBounded(cmd, 3*time.Minute)
		if err != nil {
			t.Fatalf("s3face_boto3.py: %v\n%s", err, out)
		}
		var figures struct{ Objects, Pages, Prefixes int }
		if err := json.Unmarshal(lastLine(out), &figures); err != nil || figures.Objects != 2*spec.Samples || figures.Prefixes != spec.Classes {
			t.Fatalf("figures %+v (%v); output:\n%s", figures, err, out)
		}
		// Every file was read (twice, HEAD and GET, and more): the store
		// gave each chunk once.
		// (The member table, read once, is the slack.)
		if read := storeReads() - before; read > float64(res.Index.TotalBytes()+64<<10) {
			t.Fatalf("reading %d files read %.0f bytes from the store; the dataset is %d", figures.Objects, read, res.Index.TotalBytes())
		}
		t.Logf("boto3: %d objects in %d pages, byte-equal; store bytes for all of them ≤ the dataset's %d", figures.Objects, figures.Pages, res.Index.TotalBytes())
	})

	// A dataset served in place has no member table: its bucket is listed
	// by reading every row group once, and its files read from them.
	t.Run("boto3, in place", func(t *testing.T) {
		py := s3Tool(t, "python3 with boto3", pythonWithBoto3)
		before := storeReads()
		cmd := exec.Command(py, filepath.Join("testdata", "s3face_boto3.py"), face, faceID, faceSecret, "hub", hubTree)
		cmd.Env = append(os.Environ(), "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent", "AWS_EC2_METADATA_DISABLED=true")
		out, err := runBounded(cmd, 3*time.Minute)
		if err != nil {
			t.Fatalf("s3face_boto3.py: %v\n%s", err, out)
		}
		var figures struct{ Objects, Pages, Prefixes int }
		if err := json.Unmarshal(lastLine(out), &figures); err != nil || figures.Objects != 2*spec.Samples || figures.Prefixes != 1 {
			t.Fatalf("figures %+v (%v); output:\n%s", figures, err, out)
		}
		// Every row group read once, for the listing; the files' HEADs and
		// GETs were hits.
		read := storeReads() - before
		if read > float64(hubBytes) {
			t.Fatalf("reading %d files read %.0f bytes from the store; the Parquet files are %d", figures.Objects, read, hubBytes)
		}
		t.Logf("boto3, in place: %d objects in %d pages, byte-equal; %.0f bytes from the store for all of them, the Parquet files are %d",
			figures.Objects, figures.Pages, read, hubBytes)
	})

	t.Run("aws-cli", func(t *testing.T) {
		aws := s3Tool(t, "the AWS CLI", awsCLI)
		home := t.TempDir()
		run := func(args ...string) string {
			cmd := exec.Command(aws, append([]string{"--endpoint-url", face}, args...)...)
			cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+faceID, "AWS_SECRET_ACCESS_KEY="+faceSecret, "AWS_DEFAULT_REGION=us-east-1",
				"AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent",
				"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=", "HOME="+home)
			out, err := runBounded(cmd, 2*time.Minute)
			if err != nil {
				t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		ls := run("s3", "ls", "s3://synth/")
		if strings.Count(ls, "PRE ") != spec.Classes {
			t.Fatalf("aws s3 ls s3://ds/:\n%s", ls)
		}
		class := spec.Sample(0).Key[:strings.IndexByte(spec.Sample(0).Key, '/')]
		want := sourceFiles(t, filepath.Join(src, class))
		ls = run("s3", "ls", "s3://synth/"+class+"/")
		if n := strings.Count(strings.TrimSpace(ls), "\n") + 1; n != len(want) {
			t.Fatalf("aws s3 ls of %s: %d lines for %d files", class, n, len(want))
		}
		dst := t.TempDir()
		run("s3", "cp", "--recursive", "--only-show-errors", "s3://synth/"+class+"/", dst)
		got := sourceFiles(t, dst)
		if len(got) != len(want) {
			t.Fatalf("aws s3 cp --recursive copied %d files of %d", len(got), len(want))
		}
		for name, b := range want {
			if !bytes.Equal(got[name], b) {
				t.Fatalf("aws s3 cp: %s differs from the source", name)
			}
		}
		t.Logf("aws s3 ls and cp --recursive of %s: %d files, byte-equal", class, len(want))
	})

	t.Run("minio-go", func(t *testing.T) {
		u, _ := url.Parse(face)
		mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(faceID, faceSecret, ""), Region: "us-east-1"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for o := range mc.ListObjects(ctx, "synth", minio.ListObjectsOptions{Recursive: true, WithMetadata: false}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			n++
		}
		if n != 2*spec.Samples {
			t.Fatalf("minio-go listed %d objects", n)
		}
		obj, err := mc.GetObject(ctx, "synth", spec.Sample(7).Key+".jpg", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(obj)
		if err != nil || !bytes.Equal(b, spec.Sample(7).Image) {
			t.Fatalf("minio-go GET: %v, %d bytes", err, len(b))
		}
	})

	// WebDataset-style: every shard read whole, in order, by plain GETs of
	// presigned URLs (what curl of a presigned URL does), twice.
	t.Run("read-through", func(t *testing.T) {
		u, _ := url.Parse(face)
		mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(faceID, faceSecret, ""), Region: "us-east-1"})
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for epoch := range 2 {
			before := storeReads()
			for c := range chunks {
				ch := res.Index.Chunk(c)
				key := strings.TrimPrefix(ch.Key, "chunks/")
				pu, err := mc.PresignedGetObject(ctx, "shards", key, time.Minute, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.Get(pu.String())
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || int64(len(b)) != ch.Size {
					t.Fatalf("epoch %d shard %s: %d, %d bytes of %d", epoch, key, resp.StatusCode, len(b), ch.Size)
				}
				want := make([]byte, ch.Size)
				if err := store.ReadRange(ctx, ch.Key, "", 0, want); err != nil || !bytes.Equal(b, want) {
					t.Fatalf("epoch %d shard %s differs from the store's (%v)", epoch, key, err)
				}
				total += ch.Size
			}
			read := storeReads() - before
			t.Logf("epoch %d: %d shards read through, %.0f bytes from the store", epoch, chunks, read)
			if epoch == 1 && read != 0 {
				t.Fatalf("the second epoch of shard reads read %.0f bytes from the store; want 0", read)
			}
		}
		_ = total
	})
}

// runBounded runs cmd, killing it after d.
func runBounded(cmd *exec.Cmd, d time.Duration) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return out.Bytes(), fmt.Errorf("killed after %v", d)
	}
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}
