package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// storeDataset is a dataset of one sample whose store is a fresh local
// directory: where membership lists are kept.
func storeDataset(t *testing.T) (*catalog.Dataset, s3backend.Store) {
	t.Helper()
	store, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ix, err := chunkindex.New([]chunkindex.Chunk{{Key: "c.tar", Size: 2048, ETag: "e", Samples: 1}},
		[]chunkindex.Sample{{Key: "s", Chunk: 0, Offset: 0, Length: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewDataset("d", "", store, ix), store
}

// TestMembersFoundInTheStores: a node keeps the list of each membership
// version it reports in its datasets' stores, and a node that never held
// a version, whose peers do not know it either — every node restarted
// since — reads it from there and lays batches out under it; a file that
// is not the version's list is not taken for it. The reproduction: such a
// version was a 409, and each rank's client moved to another version on
// its own, splitting a step between two layouts.
func TestMembersFoundInTheStores(t *testing.T) {
	ds, store := storeDataset(t)
	datasets := func() ([]*catalog.Dataset, error) { return []*catalog.Dataset{ds}, nil }
	urls := []string{"http://node0.invalid", "http://node1.invalid", "http://node2.invalid", "http://node3.invalid"}
	before, _ := cluster.NewMembership(urls[:3])
	newTracker := func(self string, list []string) *Tracker {
		m := New(Config{Self: self, Members: Static(list), Peers: newNodes(self), Probe: 10 * time.Millisecond, Datasets: datasets,
			Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
		m.Start()
		t.Cleanup(m.Close)
		return m
	}
	// Node 0 reports the three of them and keeps their list.
	newTracker(urls[0], urls[:3])
	key := KeptPrefix + before.Version()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := store.Stat(context.Background(), key); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not kept in the store 10 s on", key)
		}
	}
	// Node 3, started after a change to all four, never held that version,
	// and no peer it asks knows it.
	later := newTracker(urls[3], urls)
	ms, err := later.Members(context.Background(), before.Version())
	if err != nil || ms.Version() != before.Version() || fmt.Sprint(ms.Members()) != fmt.Sprint(before.Members()) {
		t.Fatalf("Members(%s) = %v, %v; want the three members, read from the store", before.Version(), ms, err)
	}
	// A version no store keeps, and one whose file holds another list.
	other, _ := cluster.NewMembership(urls[1:])
	for _, version := range []string{"00000000deadbeef", other.Version()} {
		if version == other.Version() {
			body := []byte(urls[0] + "\n")
			if _, err := store.Put(context.Background(), KeptPrefix+version, bytes.NewReader(body), int64(len(body))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := later.Members(context.Background(), version); !errors.Is(err, ErrUnknownMembers) {
			t.Errorf("Members(%s) = %v; want ErrUnknownMembers", version, err)
		}
	}
}
