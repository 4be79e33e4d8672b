package jobsched

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/s3backend"
)

// twoNodes returns two books over one dataset store, as two nodes of a
// cluster see it, with a clock the test moves.
func twoNodes(t *testing.T) (*Book, *Book, *time.Time) {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stores := func() ([]string, map[string]Store) {
		return []string{"web", "code"}, map[string]Store{"web": st, "code": st}
	}
	now := time.Unix(1000, 0)
	a, b := New(stores), New(stores)
	a.now = func() time.Time { return now }
	b.now = a.now
	return a, b, &now
}

func TestEditChain(t *testing.T) {
	ctx := context.Background()
	a, b, now := twoNodes(t)
	if _, err := a.Current(ctx, "run"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("no schedule yet: %v", err)
	}
	v1, err := a.Edit(ctx, "run", "0:web:0.7,code:0.3", 0, "", 0, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Edit(ctx, "run", "0:web:1,code:1", 0, "", 0, false, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v1.Version) {
		t.Fatalf("a second first schedule: %v", err)
	}
	a.Served("run", 99)
	// An edit at or before a step read is refused, naming it.
	if _, err := a.Edit(ctx, "run", "99:web:1,code:1", 99, v1.Version, 99, true, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "step 99") {
		t.Fatalf("an edit from a step read: %v", err)
	}
	v2, err := a.Edit(ctx, "run", "100:web:0.3,code:0.7;200~300:web:0,code:1", 100, v1.Version, 99, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Previous != v1.Version || v2.Schedule != "0:web:0.7,code:0.3;100:web:0.3,code:0.7;200~300:web:0,code:1" {
		t.Fatalf("edited: %+v", v2)
	}
	// Node b reads the chain again for a step it has not laid out.
	if cur, err := b.For(ctx, "run", "latest", 100, 100, false); err != nil || cur.Version != v2.Version {
		t.Fatalf("node b's current: %v %v", cur, err)
	}
	// A racing edit on b, based on v1: refused, naming v2.
	if _, err := b.Edit(ctx, "run", "150:web:1,code:1", 150, v1.Version, 99, true, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v2.Version) {
		t.Fatalf("a racing edit: %v", err)
	}
	// Inside a ramp: refused, the schedule unchanged.
	if _, err := a.Edit(ctx, "run", "250:web:1,code:1", 250, v2.Version, 99, true, nil); !errors.Is(err, api.ErrMix) {
		t.Fatalf("an edit inside a ramp: %v", err)
	}
	// Requests under v1: served before step 100, refused from it.
	if v, err := b.For(ctx, "run", v1.Version, 90, 99, false); err != nil || v.Version != v1.Version {
		t.Fatalf("v1 before the edit: %v %v", v, err)
	}
	if _, err := b.For(ctx, "run", v1.Version, 96, 103, false); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v2.Version) {
		t.Fatalf("v1 across the edit: %v", err)
	}
	// Node b edits v2 after a second: node a sees it once its second is up.
	*now = now.Add(2 * time.Second)
	v3, err := b.Edit(ctx, "run", "400:web:1,code:1", 400, v2.Version, 99, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := a.Current(ctx, "run"); err != nil || cur.Version != v3.Version {
		t.Fatalf("node a after b's edit: %v %v", cur, err)
	}
	// Within the second, a step node a has laid out before is not read
	// again; a later one is.
	*now = now.Add(2 * time.Second)
	v4, err := b.Edit(ctx, "run", "500:web:1,code:2", 500, v3.Version, 99, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.For(ctx, "run", v3.Version, 500, 500, false); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), v4.Version) {
		t.Fatalf("node a, step 500 under v3 after b's edit: %v", err)
	}
	if _, err := a.For(ctx, "run", v1.Version, 0, 99, false); err != nil {
		t.Fatalf("v1 before both edits: %v", err)
	}
	if _, err := a.For(ctx, "run", v2.Version, 350, 420, false); !errors.Is(err, ErrConflict) {
		t.Fatalf("v2 across v3's edit: %v", err)
	}
	if _, err := a.For(ctx, "run", "0123456789abcdef", 0, 1, false); !errors.Is(err, ErrUnknown) {
		t.Fatalf("a version that never was: %v", err)
	}
	// A third book, as a node started later, finds everything in the store.
	c := New(a.stores)
	if v, err := c.For(ctx, "run", v2.Version, 350, 399, false); err != nil || v.Version != v2.Version {
		t.Fatalf("a new node, v2 before v3's edit: %v %v", v, err)
	}
}
