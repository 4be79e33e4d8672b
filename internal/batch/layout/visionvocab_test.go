package layout

import (
	"errors"
	"strings"
	"testing"

	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/job/catalog"
)

// TestVisionMixtureOfAnotherVocabulary: a vision mixture whose text
// dataset was not tokenized by the image-text dataset's tokenizer (here
// Megatron documents of no vocabulary the facts name) is refused, saying
// that the text datasets must share it and naming both.
func TestVisionMixtureOfAnotherVocabulary(t *testing.T) {
	vis, _, rule := visionMixFixture(t)
	other := tokenDataset(t, "other", "int32", megatrontest.Corpus(40, 200, 1000, 3))
	job := tokenJob(t, "mix=vis:1,other:1&seq=256&mix_block=6&batch_size=3&world=2&vision="+rule)
	_, err := New(nil).Mixture(job.Mix, []*catalog.Dataset{vis, other}, job)
	if !errors.Is(err, ErrVision) || !strings.Contains(err.Error(), "must share the image-text dataset's tokenizer") || !strings.Contains(err.Error(), "other") {
		t.Fatalf("%v; want ErrVision saying the text datasets share the tokenizer", err)
	}
}
