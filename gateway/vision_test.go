package gateway_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/visiontest"
)

// The model-based test's image-text samples (internal/testsupport/visiontest).
var (
	visionStore  = visiontest.Store
	visionCorpus = visiontest.Corpus
	npyInt32s    = visiontest.Int32s
)

// TestVisionRefusedOverHTTP: what a vision job cannot be served is a 400
// saying why: a dataset without image-text facts names how to write them
// (brand index --tokenizer), pack=concat names itself. What a vision
// job's sequences hold — token for token, member for member, and a
// sample whose pixels are cut short — is internal/batch/visit's
// (TestVisionSequences, TestVisionTruncatedPixels, over the stages a
// node wires); the rest of its epoch, balance= and mixtures the layout's;
// its /plan the table's (TestTableOnEveryEndpoint).
func TestVisionRefusedOverHTTP(t *testing.T) {
	f := newFixture(t, 2, 4)
	_, srv := start(t, f.store, nil)
	const job = "seq=64&vision=size:28x28,patch:14,image:1"
	if resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+job); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("brand index --tokenizer")) {
		t.Fatalf("a dataset without facts: %s %s; want 400 saying how to write them", resp.Status, body)
	}
	if resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+job+"&pack=concat&eos=1"); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("pack=concat")) {
		t.Fatalf("pack=concat: %s %s; want 400 naming it", resp.Status, body)
	}
}
