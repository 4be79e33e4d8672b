package client

import (
	"context"
	"fmt"
	"net/url"

	"github.com/brandgw/brand/api"
)

// member is one regular tar member of a batch's body, kept so that the
// body can be cut into samples again by its manifest.
type member struct {
	key, ext string
	data     []byte
	end      int64 // offset just past its padding; -1 if unknown
}

// ambiguous reports whether the grouping of a mixture batch's members
// (DecodeTar's: a new sample where the key changes or an extension
// repeats) may differ from the batch's samples, of which the headers
// count want. Grouping misses a boundary only between two adjacent
// samples with equal keys, which a mixture can send: two components may
// store the same key, and a small component repeats within an epoch. If
// no two adjacent groups share a key and there are want of them, each
// group is a whole run of one key, each run holds at least one sample,
// so each holds exactly one and the grouping is the batch's.
func ambiguous(samples []Sample, want int) bool {
	if len(samples) != want {
		return true
	}
	for i := 1; i < len(samples); i++ {
		if samples[i].Key == samples[i-1].Key {
			return true
		}
	}
	return false
}

// mixManifest fetches the manifest of the batch that fetchBatch read with
// the job query q from offset.
func mixManifest(ctx context.Context, c *Client, epoch, batch, offset int, q url.Values) (*Manifest, error) {
	mq := make(url.Values, len(q)+1)
	for k, v := range q {
		mq[k] = v
	}
	mq.Set(api.ParamFormat, "json")
	m, err := getJSON[Manifest](ctx, c.t, batchPath(epoch, batch), mq)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Epoch != epoch || m.Batch != batch || m.Offset != offset {
		return nil, fmt.Errorf("%w: asked for the manifest of epoch %d batch %d from offset %d, got epoch %d batch %d from offset %d",
			ErrBadResponse, epoch, batch, offset, m.Epoch, m.Batch, m.Offset)
	}
	return m, nil
}

// splitByManifest cuts a mixture batch's members into its samples by the
// lengths its manifest m gives, in order, instead of by key. The batch's
// headers are h and the samples' components comps (of mix). Every cut
// must fall at the end of a member, the lengths must add up to the
// body's members, and each piece must hold its manifest sample's key and
// no extension twice; anything else is ErrBadResponse.
//
// A whole batch must carry the manifest's ETag, or the two answers come
// from different plans (an index reloaded between them). A partial batch
// (skip mode) has another ETag and leaves out the samples the manifest
// lists as Missing; those are known there by key alone, so a key of
// another component sent beside them is left out too and the count, the
// components or the lengths then disagree.
func splitByManifest(members []member, m *Manifest, h BatchHeader, comps []int, mix api.Mix) ([]Sample, error) {
	entries := m.Samples
	if h.Missing > 0 {
		gone := make(map[string]bool, len(m.Missing))
		for _, k := range m.Missing {
			gone[k] = true
		}
		entries = nil
		for _, e := range m.Samples {
			if !gone[e.Key] {
				entries = append(entries, e)
			}
		}
	} else if m.ETag != h.ETag {
		return nil, fmt.Errorf("%w: batch has ETag %s, its manifest %s", ErrBadResponse, h.ETag, m.ETag)
	}
	if len(entries) != h.Samples || len(comps) != h.Samples {
		return nil, fmt.Errorf("%w: batch has %d samples (%d components), its manifest %d", ErrBadResponse, h.Samples, len(comps), len(entries))
	}
	out := make([]Sample, len(entries))
	var at int64
	j := 0
	for i, e := range entries {
		if want := mix[comps[i]].Dataset; e.Dataset != want {
			return nil, fmt.Errorf("%w: batch sample %d is of %q, its manifest's of %q", ErrBadResponse, i, want, e.Dataset)
		}
		at += e.Length
		start := j
		for j < len(members) && members[j].end >= 0 && members[j].end < at {
			j++
		}
		if j == len(members) || members[j].end != at {
			return nil, fmt.Errorf("%w: manifest sample %d (%s, %d bytes) does not end where a tar member does", ErrBadResponse, i, e.Key, e.Length)
		}
		j++
		s := Sample{Key: e.Key, Files: make(map[string][]byte, j-start)}
		for _, mb := range members[start:j] {
			if mb.key != e.Key || hasExt(s, mb.ext) {
				return nil, fmt.Errorf("%w: manifest sample %d is %s, the body has %s.%s there", ErrBadResponse, i, e.Key, mb.key, mb.ext)
			}
			s.Files[mb.ext] = mb.data
		}
		out[i] = s
	}
	if j != len(members) {
		return nil, fmt.Errorf("%w: the manifest's samples end at byte %d, the body's at %d", ErrBadResponse, at, members[len(members)-1].end)
	}
	return out, nil
}
