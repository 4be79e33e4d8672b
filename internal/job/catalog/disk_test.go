package catalog

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/disktier"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// diskFixture is a dataset of 16 chunks in a local store whose reads are
// counted, loaded into a catalog.
func diskFixture(t *testing.T) (*s3test.Store, *Dataset, *Catalog) {
	t.Helper()
	st := s3test.Wrap(packedStore(t, 16, 8))
	ds, cat := loadCatalog(t, st)
	st.Take() // the index's reads are not the chunks'
	return st, ds, cat
}

// loadAll loads every chunk of ds through a loader over tier, checks its
// bytes against the store's, offers it to the tier as the cache does
// (waiting for the tier to let it go), and returns how many came from
// the disk.
func loadAll(t *testing.T, ds *Dataset, cat *Catalog, tier *disktier.Tier) int {
	t.Helper()
	ctx := context.Background()
	l := NewLoader(cat, time.Minute, 2).WithDisk(tier)
	below := 0
	for c := range ds.Index.NumChunks() {
		k := ds.ChunkKey(c)
		buf := make([]byte, ds.Index.Chunk(c).Size)
		disk, err := l.LoadTiered(ctx, k, buf)
		if err != nil {
			t.Fatalf("chunk %d: %v", c, err)
		}
		want := make([]byte, len(buf))
		if err := ds.Store.(*s3test.Store).Store.ReadRange(ctx, k.Object, "", 0, want); err != nil { // not counted
			t.Fatal(err)
		}
		if !bytes.Equal(buf, want) {
			t.Fatalf("chunk %d (from the disk: %t) is not the store's", c, disk)
		}
		if disk {
			below++
			continue
		}
		done := make(chan struct{})
		l.Spill(k, buf, func() { close(done) })
		<-done
	}
	return below
}

func openTier(t *testing.T, dir string, capacity int64, write func(string, []byte, []byte) error) *disktier.Tier {
	t.Helper()
	tier, err := disktier.Open(disktier.Config{Dirs: []string{dir}, Capacity: capacity, WriteFile: write,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return tier
}

// TestLoaderThroughTheDisk: the loader reads a chunk from the disk tier
// when the tier holds it whole and right, and from the store otherwise,
// each chunk it misses once. A tier opened again on the same directory
// (a gateway restarted) serves every chunk from disk; truncated, garbled
// and foreign files, what a kill mid-write leaves, and a stranger's file
// are never served: their chunks come from the store, each once, and
// the tier drops the five files.
func TestLoaderThroughTheDisk(t *testing.T) {
	st, ds, cat := diskFixture(t)
	dir := t.TempDir()
	var total int64
	for c := range ds.Index.NumChunks() {
		total += ds.Index.Chunk(c).Size
	}
	n := ds.Index.NumChunks()
	tier := openTier(t, dir, 2*total, nil)
	if below := loadAll(t, ds, cat, tier); below != 0 || len(st.Take()) != n {
		t.Fatalf("an empty tier gave %d chunks", below)
	}
	tier.Close()

	tier = openTier(t, dir, 2*total, nil)
	if found := tier.Stats().Found; found != int64(n) {
		t.Fatalf("the tier opened again found %d chunks, want %d", found, n)
	}
	if below, reads := loadAll(t, ds, cat, tier), st.Take(); below != n || len(reads) != 0 {
		t.Fatalf("the tier opened again gave %d chunks of %d; the store was read for %v", below, n, reads)
	}
	tier.Close()

	sub := filepath.Join(dir, disktier.Subdir)
	des, err := os.ReadDir(sub)
	if err != nil || len(des) != n {
		t.Fatalf("the tier holds %d files (%v), want %d", len(des), err, n)
	}
	var files []string
	for _, de := range des {
		files = append(files, filepath.Join(sub, de.Name()))
	}
	slices.Sort(files)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// 0: truncated. 1: a byte in the middle flipped (inside a sample:
	// the header is right, so only the samples' CRC32C can tell). 2: the
	// file of another chunk under its name (foreign). A write cut short
	// by a kill: a temporary file. A stranger's file.
	info, _ := os.Stat(files[0])
	must(os.Truncate(files[0], info.Size()/2))
	b, _ := os.ReadFile(files[1])
	b[len(b)/2] ^= 0x40
	must(os.WriteFile(files[1], b, 0o644))
	b3, _ := os.ReadFile(files[3])
	must(os.WriteFile(files[2], b3, 0o644))
	must(os.WriteFile(files[4]+".tmp-98765", b3[:len(b3)/3], 0o644))
	must(os.WriteFile(filepath.Join(sub, "0000stranger.chunk"), []byte("BRANDCHK but not really"), 0o644))

	tier = openTier(t, dir, 2*total, nil)
	defer tier.Close()
	below := loadAll(t, ds, cat, tier)
	reads := st.Take()
	if below != n-3 || len(reads) != 3 {
		t.Fatalf("%d chunks from the disk; the store was read for %v; want the 3 damaged ones", below, reads)
	}
	for k, r := range reads {
		if r.Reads != 1 {
			t.Fatalf("chunk %s read %d times from the store", k, r.Reads)
		}
	}
	if s := tier.Stats(); s.Dropped != 5 {
		t.Fatalf("tier %+v: want 5 files dropped (truncated, garbled, foreign, incomplete, stranger)", s)
	}
}

// TestLoaderWithAFailingDisk: a drive that fills up, or fails every
// write, after three chunks costs the tier its writes, never a load: every
// chunk is loaded right from the store, the tier counts the errors and
// holds at most the three, and a full drive is reported.
func TestLoaderWithAFailingDisk(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
		t.Run(errno.Error(), func(t *testing.T) {
			st, ds, cat := diskFixture(t)
			var mu sync.Mutex
			writes := 0
			failing := func(path string, header, data []byte) error {
				mu.Lock()
				defer mu.Unlock()
				writes++
				if writes > 3 {
					return &os.PathError{Op: "write", Path: path, Err: errno}
				}
				return os.WriteFile(path, append(append([]byte{}, header...), data...), 0o644)
			}
			tier := openTier(t, t.TempDir(), 1<<30, failing)
			defer tier.Close()
			loadAll(t, ds, cat, tier)
			if reads := st.Take(); len(reads) != ds.Index.NumChunks() {
				t.Fatalf("the store was read for %d chunks of %d", len(reads), ds.Index.NumChunks())
			}
			s := tier.Stats()
			if s.Errors == 0 || s.Chunks > 3 {
				t.Fatalf("tier %+v: want write errors and at most the 3 chunks written", s)
			}
			if errno == syscall.ENOSPC && s.FullDirs != 1 {
				t.Fatalf("tier %+v: the full drive is not reported", s)
			}
		})
	}
}
