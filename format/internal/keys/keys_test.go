package keys

import "testing"

func TestAppend(t *testing.T) {
	got := Append([]string{"x"}, "a/b", 998, 4, 3)
	want := []string{"x", "a/b/998", "a/b/999", "a/b/1000", "a/b/1001"}
	if len(got) != len(want) {
		t.Fatal(got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: %q, want %q", i, got[i], want[i])
		}
	}
	for _, i := range []int{0, 5, 999999, 1000000, 123456789012} {
		if k := One("s", i, 6); len(k) != Len("s", i, 6) {
			t.Errorf("%d: %q, Len %d", i, k, Len("s", i, 6))
		}
	}
	if One("s", 42, 6) != "s/000042" {
		t.Error(One("s", 42, 6))
	}
}
