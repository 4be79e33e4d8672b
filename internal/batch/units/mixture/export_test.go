package mixture

import "github.com/brandgw/brand/shuffle"

// MaxMemoMixSpanBytes is the bound of the memo of spans.
const MaxMemoMixSpanBytes = maxMemoMixSpanBytes

// SpanMemo is what the memo of x's spans counts, and what its spans and
// the mixtures they hold (each once) take, and how many of each.
func (x *Mixtures) SpanMemo() (counted, held int64, spans, mixtures int) {
	s := x.spans
	seen := map[*shuffle.Mixture]bool{}
	for _, sp := range s.memo.Values() {
		held += sp.Bytes()
		if m := sp.Mixture(); !seen[m] {
			seen[m] = true
			held += m.Bytes()
		}
	}
	return s.bytes.Load(), held, s.memo.Len(), len(seen)
}
