package planner

// Quality measures how well the shuffle mixes the batches a rank receives,
// over the simulated epochs. Each figure is over rank batches (the
// BatchSize samples one rank takes from a global batch; a short final one
// counts with its own length, an empty one not at all).
//
//   - MeanDistinctChunksPerBatch: the mean number of distinct chunks a batch
//     draws from. A full shuffle approaches min(BatchSize, chunks); window 1
//     gives about BatchSize/(samples per chunk) + 1, since a batch is then a
//     run of consecutive chunks' samples.
//   - MaxChunkShare: the mean over batches of the largest fraction of the
//     batch that comes from a single chunk. Samples of one chunk are often
//     correlated (one source, one class, one crawl), so this is the
//     correlation a training step sees on average; 1/BatchSize is perfect.
//   - WorstChunkShare: the largest such fraction in any batch: the most
//     correlated batch of the simulated epochs.
type Quality struct {
	Batches                    int     `json:"batches"`
	MeanDistinctChunksPerBatch float64 `json:"mean_distinct_chunks_per_batch"`
	MaxChunkShare              float64 `json:"max_chunk_share"`
	WorstChunkShare            float64 `json:"worst_chunk_share"`
}

// qualityMeter accumulates Quality from global batches as walk yields them.
type qualityMeter struct {
	batchSize int
	count     []int32 // samples of chunk c in the current rank batch
	touched   []int32 // chunks with a non-zero count

	batches     int
	distinctSum float64
	shareSum    float64
	worst       float64
}

func newQualityMeter(chunks, batchSize int) *qualityMeter {
	return &qualityMeter{batchSize: batchSize, count: make([]int32, chunks)}
}

// add takes a global batch (the chunk of each sample in epoch order) and
// measures each rank's slice of it.
func (q *qualityMeter) add(_ int, chunks []int32) {
	for lo := 0; lo < len(chunks); lo += q.batchSize {
		q.addRankBatch(chunks[lo:min(lo+q.batchSize, len(chunks))])
	}
}

func (q *qualityMeter) addRankBatch(chunks []int32) {
	var most int32
	for _, c := range chunks {
		if q.count[c] == 0 {
			q.touched = append(q.touched, c)
		}
		q.count[c]++
		most = max(most, q.count[c])
	}
	share := float64(most) / float64(len(chunks))
	q.batches++
	q.distinctSum += float64(len(q.touched))
	q.shareSum += share
	q.worst = max(q.worst, share)
	for _, c := range q.touched {
		q.count[c] = 0
	}
	q.touched = q.touched[:0]
}

func (q *qualityMeter) quality() Quality {
	if q.batches == 0 {
		return Quality{}
	}
	return Quality{
		Batches:                    q.batches,
		MeanDistinctChunksPerBatch: q.distinctSum / float64(q.batches),
		MaxChunkShare:              q.shareSum / float64(q.batches),
		WorstChunkShare:            q.worst,
	}
}
