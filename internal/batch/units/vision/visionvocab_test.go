package vision_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/units"
	uvis "github.com/brandgw/brand/internal/batch/units/vision"

	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/job/catalog"
)

// TestVisionMixtureOfAnotherVocabulary: a vision mixture whose text
// dataset was not tokenized by the image-text dataset's tokenizer (here
// Megatron documents of no vocabulary the facts name) is refused, saying
// that the text datasets must share it and naming both.
func TestVisionMixtureOfAnotherVocabulary(t *testing.T) {
	vis, _, rule := unitstest.VisionMixFixture(t)
	other := unitstest.TokenDataset(t, "other", "int32", megatrontest.Corpus(40, 200, 1000, 3))
	job := unitstest.TokenJob(t, "mix=vis:1,other:1&seq=256&mix_block=6&batch_size=3&world=2&vision="+rule)
	_, err := unitstest.Mixture(units.Orders(nil), job.Mix, []*catalog.Dataset{vis, other}, job)
	if !errors.Is(err, uvis.ErrVision) || !strings.Contains(err.Error(), "must share the image-text dataset's tokenizer") || !strings.Contains(err.Error(), "other") {
		t.Fatalf("%v; want ErrVision saying the text datasets share the tokenizer", err)
	}
}
