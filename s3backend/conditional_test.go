package s3backend_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/s3backend"
)

// checkPutIfAbsent runs PutIfAbsent's contract on st: of 16 writers
// racing on one key exactly one succeeds and the object is its bytes;
// the others fail with ErrExists and change nothing; Put still replaces.
func checkPutIfAbsent(t *testing.T, st s3backend.Store) {
	ctx := context.Background()
	const writers = 16
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			body := fmt.Appendf(nil, "writer %02d", i)
			_, errs[i] = st.PutIfAbsent(ctx, "epochs/7", bytes.NewReader(body), int64(len(body)))
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both created the object", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, s3backend.ErrExists):
			t.Fatalf("writer %d: %v, want ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer created the object")
	}
	want := fmt.Sprintf("writer %02d", winner)
	got := make([]byte, len(want))
	if err := st.ReadRange(ctx, "epochs/7", "", 0, got); err != nil || string(got) != want {
		t.Fatalf("the object holds %q (%v), the winner wrote %q", got, err, want)
	}
	if info, err := st.Stat(ctx, "epochs/7"); err != nil || info.Size != int64(len(want)) {
		t.Fatalf("Stat = %+v, %v; want %d bytes", info, err, len(want))
	}
	objs, err := st.List(ctx, "epochs/")
	if err != nil || len(objs) != 1 {
		t.Fatalf("List = %v, %v; want the one object", objs, err)
	}
	if _, err := st.PutIfAbsent(ctx, "epochs/8", strings.NewReader("x"), 1); err != nil {
		t.Fatalf("another key: %v", err)
	}
	if _, err := st.PutIfAbsent(ctx, "epochs/9", strings.NewReader("x"), -1); err == nil {
		t.Error("PutIfAbsent of unknown size succeeded")
	}
	if _, err := st.PutIfAbsent(ctx, "../x", strings.NewReader("x"), 1); !errors.Is(err, s3backend.ErrInvalidKey) {
		t.Errorf("an invalid key: %v, want ErrInvalidKey", err)
	}
}

// checkDelete runs Delete's contract on st: the object is gone, and
// deleting it again, or a key never written, succeeds.
func checkDelete(t *testing.T, st s3backend.Store) {
	ctx := context.Background()
	if _, err := st.Put(ctx, "snap/a", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "snap/b", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := st.Delete(ctx, "snap/a"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := st.Stat(ctx, "snap/a"); !errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("Stat after Delete: %v, want ErrNotFound", err)
	}
	if objs, err := st.List(ctx, "snap/"); err != nil || len(objs) != 1 || objs[0].Key != "snap/b" {
		t.Fatalf("List after Delete = %v, %v; want snap/b alone", objs, err)
	}
	if err := st.Delete(ctx, "never/written"); err != nil {
		t.Errorf("deleting a key never written: %v", err)
	}
	if err := st.Delete(ctx, "a/../b"); !errors.Is(err, s3backend.ErrInvalidKey) {
		t.Errorf("an invalid key: %v, want ErrInvalidKey", err)
	}
	// A deleted key can be created again.
	if _, err := st.PutIfAbsent(ctx, "snap/a", strings.NewReader("new"), 3); err != nil {
		t.Errorf("PutIfAbsent after Delete: %v", err)
	}
}

func TestLocalPutIfAbsent(t *testing.T) {
	dir := t.TempDir()
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkPutIfAbsent(t, st)
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".brand-tmp-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

func TestLocalDelete(t *testing.T) {
	obs := &observer{}
	st, err := s3backend.Open(context.Background(), t.TempDir(), s3backend.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	checkDelete(t, st)
	if n, failed := obs.count(s3backend.OpDelete); n != 3 || failed != 0 {
		t.Errorf("observed %d deletions, %d failed; want 3, 0", n, failed)
	}
	// A key naming a directory holds no object to delete.
	if err := st.Delete(context.Background(), "snap"); err != nil {
		t.Errorf("deleting a directory's name: %v", err)
	}
}

func (e *env) testPutIfAbsent(t *testing.T) {
	obs := &observer{}
	st, _ := e.store(t, nil, obs, nil)
	checkPutIfAbsent(t, st)
	if _, failed := obs.count(s3backend.OpPut); failed < 15 {
		t.Errorf("observed %d failed puts; the 15 writers that lost each got a 412", failed)
	}
}

func (e *env) testDelete(t *testing.T) {
	st, _ := e.store(t, nil, nil, nil)
	checkDelete(t, st)
}
