package tokenize_test

import (
	"fmt"
	"log"
	"os"

	"github.com/brandgw/brand/tokenize"
)

func Example() {
	data, err := os.ReadFile("testdata/golden-bpe.model") // a model the reference trained
	if err != nil {
		log.Fatal(err)
	}
	m, err := tokenize.Load(data)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Algorithm(), m.VocabSize(), m.Fingerprint())
	fmt.Printf("%+v\n", m.Special())

	// One model serves every goroutine; Append reuses a buffer. Each
	// invalid byte is encoded as U+FFFD, here in byte pieces.
	var ids []int32
	for _, doc := range []string{"the world", "caf\xc3 \xff"} {
		if ids, err = m.Append(ids[:0], []byte(doc)); err != nil {
			log.Fatal(err)
		}
		fmt.Println(ids)
	}
	// Output:
	// bpe 1000 fc1b49063a978335
	// {Unk:0 BOS:1 EOS:2 Pad:3}
	// [265 272 302 392]
	// [292 539 549 246 198 196 536 246 198 196]
}
