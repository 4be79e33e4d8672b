package pythontest

import (
	"context"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	ctx := context.Background()
	if _, err := Find(ctx, []string{"", "no-such-python-for-brand"}); err == nil || !strings.Contains(err.Error(), "no-such-python-for-brand: not found") {
		t.Fatalf("a missing candidate: %v", err)
	}
	py := Need(t, "")
	if got, err := Find(ctx, []string{py}); err != nil || got != py {
		t.Fatalf("Find(%s) = %q, %v", py, got, err)
	}
	_, err := Find(ctx, []string{py}, "json", "no_such_module_for_brand")
	if err == nil || !strings.Contains(err.Error(), "imports json, no_such_module_for_brand") || !strings.Contains(err.Error(), "No module named") {
		t.Fatalf("a missing module: %v", err)
	}
}
