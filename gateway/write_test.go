package gateway

import "testing"

func TestEscapeKey(t *testing.T) {
	tests := []struct{ key, want string }{
		{"class1/img_0001", "class1/img_0001"},
		{"a,b", "a%2Cb"},
		{"100%", "100%25"},
		{"with space", "with%20space"},
		{"é", "%C3%A9"},
	}
	for _, tc := range tests {
		if got := escapeKey(tc.key); got != tc.want {
			t.Errorf("escapeKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
