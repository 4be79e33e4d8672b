package gateway_test

import (
	"fmt"
	"net/url"
	"strconv"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
)

// mVisMerge is the merge of mVisRule: a vision token is mVisMerge² of
// the encoder's patches.
const mVisMerge = 2

// mVisRule is a vision round's rule over a tokenizer of vocab IDs: a
// dynamic resolution, its placeholder and its start and end IDs past
// the vocabulary, and, unless cap is 0, a cap of images a sequence.
func mVisRule(vocab, cap int) string {
	s := fmt.Sprintf("min:3136,max:25088,patch:14,merge:%d,image:%d,start:%d,end:%d", mVisMerge, vocab, vocab+1, vocab+2)
	if cap > 0 {
		s += ",images:" + strconv.Itoa(cap)
	}
	return s
}

// visionRound is a round of a vision job (seq= with vision=) over mVis,
// held as a token job is (tokenRun): its packing is package vision's,
// tested there and in internal/batch/visit's TestVisionSequences, so the model is its cut —
// each sequence keyed by its epoch position, the plain cut's positions
// for each rank, and with balance=attention, tokens or vision §13.3's
// assignment of the global batch by the sequences' costs as the test
// counts them from their members — and the epoch read at world 1, the
// same bytes (images included) at every position; a resume at another
// world size, a gateway started over the same stores, the job's edits
// and the round's share of the refused pairs and random requests,
// refused as the rules say. On one gateway or a cluster of three, as
// the round draws.
func visionRound(t *testing.T, seed uint64) {
	r := roundRand(seed)
	w := newMWorld(t, r)
	w.withVision(t, r)
	nodes := []int{1, 3}[r.IntN(2)]
	ns := startMNodes(t, w, nodes)
	j := &mJob{t: t, r: r, w: w, nodes: ns, q: url.Values{}}
	j.q.Set("dataset", mVis)
	j.q.Set("seq", strconv.Itoa([]int{160, 224, 320}[r.IntN(3)]))
	j.q.Set("pad", strconv.Itoa(tokPad))
	j.q.Set("vision", mVisRule(w.vocab, []int{0, 0, 3}[r.IntN(3)]))
	j.q.Set("seed", strconv.FormatUint(r.Uint64()>>1, 10))
	j.q.Set("window", strconv.Itoa(1+r.IntN(4)))
	if r.IntN(2) == 0 {
		j.q.Set("locality", "false")
	}
	j.q.Set("job", fmt.Sprintf("vis%d", r.IntN(1000)))
	balance := []string{"", api.BalanceAttention, api.BalanceTokens, api.BalanceVision, api.BalanceVision}[r.IntN(5)]
	plain := url.Values{}
	for k, v := range j.q {
		plain[k] = v
	}
	plain.Del("job")
	if balance != "" {
		j.q.Set("balance", balance)
	}
	j.cut = jobmodel.Cut{B: 1 + r.IntN(3), World: 1 + r.IntN(5), DropLast: r.IntN(3) == 0}
	t.Logf("job %s on %d nodes, %+v", j.q.Encode(), nodes, j.cut)
	j.tokenRun(seed, plain, balance)
}
