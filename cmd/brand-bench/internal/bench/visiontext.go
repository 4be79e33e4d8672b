package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// tokenCountPattern reads the counts `brand index --text` prints.
var tokenCountPattern = regexp.MustCompile(`token dataset: ([\d,]+) documents, ([\d,]+) tokens`)

// visionTokenizers writes the text corpus, indexes it with each
// tokenizer, and reads each one's cold epoch through fresh gateways.
func visionTokenizers(ctx context.Context, cfg VisionConfig, rep *VisionReport, srv *miniotest.Server, env, s3flags []string, files map[string]string, vocab map[string]int) error {
	data, textBytes, err := textCorpus(cfg.TextDocs, 1000, cfg.Seed)
	if err != nil {
		return err
	}
	rep.CorpusBytes = textBytes
	if err := srv.MakeBucket(ctx, "text"); err != nil {
		return err
	}
	store, err := s3backend.Open(ctx, "s3://text/src", srv.Config())
	if err != nil {
		return err
	}
	if _, err := store.Put(ctx, "data/train-0.parquet", bytes.NewReader(data), int64(len(data))); err != nil {
		return err
	}
	kinds := []string{tokSP, tokBPE}
	tokens := map[string]int64{}
	for _, k := range kinds {
		out, err := runBrandCmd(ctx, cfg.GatewayBinary, env, append([]string{"index", "--src", "s3://text/src", "--dst", "s3://text/" + k,
			"--text", "text", "--tokenizer", files[k], "--chunk-size", "1MiB"}, s3flags...)...)
		if err != nil {
			return err
		}
		m := tokenCountPattern.FindStringSubmatch(out)
		if m == nil {
			return fmt.Errorf("bench: brand index --tokenizer %s said %q, no token count", files[k], lastLines(out, 3))
		}
		tokens[k], _ = strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
		logf(cfg.Log, "text corpus, %s: %s documents, %s tokens (%s of text)", k, m[1], m[2], sizeString(textBytes))
	}
	for round := range cfg.TextRounds {
		g, err := startGateway(ctx, cfg.GatewayBinary, append([]string{"serve", "--listen", "127.0.0.1:0",
			"--dataset", "sentencepiece=s3://text/" + tokSP, "--dataset", "bpe=s3://text/" + tokBPE,
			"--cache-size", strconv.FormatInt(8*textBytes+(256<<20), 10), "--log-format", "json", "--log-level", "info",
			"--shutdown-timeout", "10s", "--index-poll", "0"}, s3flags...), env, filepath.Join(cfg.WorkDir, fmt.Sprintf("gateway-text-%d.log", round)))
		if err != nil {
			return err
		}
		order := kinds
		if round%2 == 1 {
			order = []string{kinds[1], kinds[0]}
		}
		for _, k := range order {
			t, err := coldTextEpoch(ctx, g, k, tokens[k])
			if err != nil {
				g.kill()
				return err
			}
			t.Round, t.File, t.Vocabulary = round, filepath.Base(files[k]), vocab[k]
			rep.Tokenizers = append(rep.Tokenizers, t)
			logf(cfg.Log, "round %d, %s: %d tokens, %.2f s, gateway %.2f CPU-s: %.2f M tokens per gateway core-s",
				round, k, t.Tokens, t.Seconds, t.GatewayCPU, t.TokensPerCore/1e6)
		}
		if err := g.stop(10 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

// coldTextEpoch reads one cold epoch of a seq=2048 job of dataset name,
// two readers draining the batches, and the gateway's CPU over it.
func coldTextEpoch(ctx context.Context, g *gatewayProc, name string, tokens int64) (VisionTokenizer, error) {
	t := VisionTokenizer{Tokenizer: name, Tokens: tokens}
	q := "dataset=" + name + "&seed=3&seq=2048&batch_size=16"
	var info struct{ Batches int }
	if _, err := gatewayJSON(ctx, g, "/epoch/0?"+q, &info); err != nil {
		return t, err
	}
	gw0, t0 := processCPU(g.cmd.Process.Pid), time.Now()
	eg, ectx := errgroup.WithContext(ctx) // two readers drain the batches
	eg.SetLimit(2)
	for m := range info.Batches {
		eg.Go(func() error {
			_, err := countingGet(ectx, g, fmt.Sprintf("/epoch/0/batch/%d?%s", m, q))
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return t, err
	}
	t.Seconds = time.Since(t0).Seconds()
	t.GatewayCPU = (processCPU(g.cmd.Process.Pid) - gw0).Seconds()
	t.TokensPerCore = ratio(float64(tokens), t.GatewayCPU)
	return t, nil
}
