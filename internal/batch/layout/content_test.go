package layout

// Tests read a batch's content by its kind through these; the stages
// after the layout take it once, where they make its bytes
// (internal/batch/visit's makerOf).

func (b *Batch) Tokens() *TokenBatch {
	t, _ := b.Content.(*TokenBatch)
	return t
}

func (b *Batch) Clips() *ClipBatch {
	c, _ := b.Content.(*ClipBatch)
	return c
}

func (b *Batch) Vision() *VisionBatch {
	v, _ := b.Content.(*VisionBatch)
	return v
}

func (b *Batch) WithoutDocuments(missing []int) *Batch {
	if b.Tokens() == nil {
		return b
	}
	nb, _ := b.Tokens().Without(b, missing)
	return nb
}

func (b *Batch) WithoutClips(missing []int) *Batch {
	if b.Clips() == nil {
		return b
	}
	nb, _ := b.Clips().Without(b, missing)
	return nb
}

func (b *Batch) WithoutClipsAt(at []int) *Batch {
	if b.Clips() == nil {
		return b
	}
	return b.Clips().WithoutAt(b, at)
}
