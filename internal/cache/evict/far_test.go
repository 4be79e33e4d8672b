package evict

import (
	"math"
	"slices"
	"testing"
)

func TestRelativeWeights(t *testing.T) {
	tests := []struct {
		name string
		w    []float64
		want []float32
	}{
		{"none", nil, []float32{}},
		{"all zero", []float64{0, 0, 0}, []float32{0, 0, 0}},
		{"over the mean", []float64{1, 1, 2}, []float32{0.75, 0.75, 1.5}},
		{"a zero among others", []float64{0, 3}, []float32{0, 2}},
		{"any scale", []float64{200, 600}, []float32{0.5, 1.5}},
		{"rounded to float32", []float64{1, 2}, []float32{float32(1.0 / 1.5), float32(2.0 / 1.5)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RelativeWeights(tt.w); !slices.Equal(got, tt.want) {
				t.Errorf("RelativeWeights(%v) = %v, want %v", tt.w, got, tt.want)
			}
		})
	}
}

func TestFarKey(t *testing.T) {
	tests := []struct {
		q    float32
		want int64
	}{
		{0, Never},
		{-1, Never},
		{float32(math.NaN()), Never},
		{1e-9, Never - 1}, // below a step: still under Never
		{1.0 / 65536, Never - 2},
		{0.5, Never - 1 - 1<<15},
		{1, Never - 1 - 1<<16},
		{1.5, Never - 1 - 3<<15},
		{1 << 20, Never - 1 - 1<<36},
		{1 << 21, Never - 1 - 1<<36}, // capped
		{float32(math.Inf(1)), Never - 1 - 1<<36},
	}
	for _, tt := range tests {
		if got := FarKey(tt.q); got != tt.want {
			t.Errorf("FarKey(%v) = Never-%d, want Never-%d", tt.q, Never-got, Never-tt.want)
		}
	}
	// The lighter goes first.
	if !(FarKey(0.25) > FarKey(0.5) && FarKey(0.5) > FarKey(2)) {
		t.Error("FarKey does not put lighter chunks first")
	}
}
