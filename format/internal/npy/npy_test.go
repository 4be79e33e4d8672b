package npy

import (
	"strings"
	"testing"
)

func TestHeader(t *testing.T) {
	tests := []struct {
		descr string
		shape []int64
		dict  string
	}{
		{"<i4", []int64{5}, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }"},
		{"|u1", []int64{2, 3, 4}, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 4), }"},
		{"<f8", nil, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }"},
		{"<u2", []int64{1234567890123}, "{'descr': '<u2', 'fortran_order': False, 'shape': (1234567890123,), }"},
	}
	for _, tt := range tests {
		b, err := AppendHeader([]byte("x"), tt.descr, tt.shape)
		if err != nil {
			t.Fatal(err)
		}
		h := b[1:]
		if len(h) != HeaderLen(tt.descr, tt.shape) || len(h)%Align != 0 {
			t.Errorf("%v: %d bytes, HeaderLen %d", tt.shape, len(h), HeaderLen(tt.descr, tt.shape))
		}
		if string(h[:8]) != "\x93NUMPY\x01\x00" || int(h[8])|int(h[9])<<8 != len(h)-10 {
			t.Errorf("%v: preamble %q", tt.shape, h[:10])
		}
		if got := strings.TrimRight(string(h[10:]), " \n"); got != tt.dict || h[len(h)-1] != '\n' {
			t.Errorf("dict %q, want %q", got, tt.dict)
		}
	}
	long := make([]int64, 7000)
	for i := range long {
		long[i] = 1 << 40
	}
	if _, err := AppendHeader(nil, "<i4", long); err != ErrTooLong {
		t.Fatal(err)
	}
}
