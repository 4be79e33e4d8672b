package client

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// A clip job's batch (Options.Job.Clip, the gateway's clip=,
// delta_timestamps= or frames=; docs/http-api.md, "Video clips") holds
// clips: over a tree of videos each sample has a "frames.npy" (uint8 (T,
// H, W, 3), or the job's clip_layout), a "cls" (its label, -1 for none)
// and a "json" (its frames' source); over a LeRobot dataset a
// "{camera}.npy" per camera window, a "{column}.npy" per data column and
// a "json". The gateway writes every clip of a batch with the same
// members of the same sizes, evenly spaced in the response.

// Frames is a tree's clip's frames member.
const Frames = "frames.npy"

// Array is one .npy member of every clip of a batch, stacked: shape
// (B, ...) of DType ("|u1" for the frames, "<f4" for a float32 column).
// Clip i's array is Data[i*Stride:][:Size]; Data is the batch's buffer
// from the first clip's array on (valid until Batch.Release), not a copy,
// whenever the clips are evenly spaced in it (the gateway's are), else a
// copy of the arrays back to back (Stride = Size).
type Array struct {
	DType        string
	Shape        []int
	Stride, Size int
	Data         []byte
}

// Clip is clip i's array: its Size bytes.
func (a Array) Clip(i int) []byte { return a.Data[i*a.Stride : i*a.Stride+a.Size : i*a.Stride+a.Size] }

// Clips is a clip job's batch as arrays: its keys, each .npy member
// stacked by its name without ".npy" ("frames"; a LeRobot dataset's
// camera and column keys), a tree's labels, and each clip's JSON.
type Clips struct {
	Keys   []string
	Arrays map[string]Array
	Labels []int
	JSON   [][]byte
}

// Clips views a clip job's batch as arrays (see Clips), without a copy
// where its clips are evenly spaced in its buffer. Samples with other
// members than the first's, or arrays of another dtype or shape, are an
// error wrapping ErrBadResponse.
func (b *Batch) Clips() (*Clips, error) {
	out := &Clips{Arrays: map[string]Array{}}
	if len(b.Samples) == 0 {
		return out, nil
	}
	exts := slices.Sorted(maps.Keys(b.Samples[0].Files))
	for _, s := range b.Samples {
		if got := slices.Sorted(maps.Keys(s.Files)); !slices.Equal(got, exts) {
			return nil, fmt.Errorf("%w: clip %s has members %v, the first %v", ErrBadResponse, s.Key, got, exts)
		}
		out.Keys = append(out.Keys, s.Key)
	}
	for _, ext := range exts {
		switch {
		case ext == "cls":
			for _, s := range b.Samples {
				n, err := strconv.Atoi(strings.TrimSpace(string(s.Files[ext])))
				if err != nil {
					return nil, fmt.Errorf("%w: clip %s: label %q", ErrBadResponse, s.Key, s.Files[ext])
				}
				out.Labels = append(out.Labels, n)
			}
		case ext == "json":
			for _, s := range b.Samples {
				out.JSON = append(out.JSON, s.Files[ext])
			}
		case strings.HasSuffix(ext, ".npy"):
			a, err := b.stack(ext)
			if err != nil {
				return nil, err
			}
			out.Arrays[strings.TrimSuffix(ext, ".npy")] = a
		}
	}
	return out, nil
}

// stack is member ext of every sample as one Array.
func (b *Batch) stack(ext string) (Array, error) {
	var a Array
	even := b.buf != nil
	var first uintptr
	for i, s := range b.Samples {
		t, err := ParseNPY(s.Files[ext])
		if err != nil {
			return Array{}, fmt.Errorf("%w: clip %s: %s: %w", ErrBadResponse, s.Key, ext, err)
		}
		if t.FortranOrder {
			return Array{}, fmt.Errorf("%w: clip %s: %s is in Fortran order", ErrBadResponse, s.Key, ext)
		}
		if i == 0 {
			a = Array{DType: t.DType, Shape: append([]int{len(b.Samples)}, t.Shape...), Size: len(t.Data)}
		} else if t.DType != a.DType || !slices.Equal(t.Shape, a.Shape[1:]) {
			return Array{}, fmt.Errorf("%w: clip %s: %s is %s %v, the first's %s %v", ErrBadResponse, s.Key, ext, t.DType, t.Shape, a.DType, a.Shape[1:])
		}
		if len(t.Data) == 0 {
			even = false
			continue
		}
		at := uintptr(unsafe.Pointer(&t.Data[0]))
		switch {
		case i == 0:
			first = at
		case i == 1:
			a.Stride = int(at - first)
		}
		if even && (at < first || int(at-first) != i*a.Stride) {
			even = false
		}
	}
	if even && len(b.buf) > 0 && a.Size > 0 {
		start := int(first - uintptr(unsafe.Pointer(&b.buf[0])))
		end := start + (len(b.Samples)-1)*a.Stride + a.Size
		if start >= 0 && end <= len(b.buf) {
			a.Data = b.buf[start:end:end]
			return a, nil
		}
	}
	// Copied: the arrays back to back.
	a.Stride = a.Size
	a.Data = make([]byte, 0, len(b.Samples)*a.Size)
	for _, s := range b.Samples {
		t, _ := ParseNPY(s.Files[ext])
		a.Data = append(a.Data, t.Data...)
	}
	return a, nil
}
