package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const formatsSynopsis = "formats [--small] [flags]"

// formatsBenchmark is the formats benchmark (bench.RunFormats): indexing
// Parquet in place, and epochs served from Parquet, MDS and tar.
func formatsBenchmark() benchmark[bench.FormatsConfig, *bench.FormatsReport] {
	return benchmark[bench.FormatsConfig, *bench.FormatsReport]{
		name: "formats", synopsis: formatsSynopsis, config: bench.DefaultFormatsConfig, timeout: 60 * time.Minute,
		small: bench.SmallFormatsConfig, smallDoc: "1,000 files of 2 photos to index, 1,000 photos: a few minutes (flags given explicitly still apply)",
		profiles: func(cfg *bench.FormatsConfig) *string { return &cfg.GatewayProfiles },
		run:      bench.RunFormats,
		flags: func(fs *flag.FlagSet, cfg *bench.FormatsConfig) func() error {
			fs.IntVar(&cfg.IndexFiles, "index-files", cfg.IndexFiles, "(1): Parquet files brand index reads the footers of")
			fs.IntVar(&cfg.IndexRowsPerFile, "index-rows", cfg.IndexRowsPerFile, "(1): photos in each of those files")
			fs.IntVar(&cfg.LargeFiles, "large-files", cfg.LargeFiles, "(1): Parquet files of about --large-file-size also indexed")
			fs.Var((*cli.ByteSize)(&cfg.LargeFileBytes), "large-file-size", "(1): their size")
			fs.IntVar(&cfg.Images, "images", cfg.Images, "(2), (3): photo-like JPEGs (internal/gen/photos) in each dataset; every epoch reads them all")
			fs.IntVar(&cfg.RowsPerGroup, "row-group", cfg.RowsPerGroup, "Parquet rows per row group")
			fs.IntVar(&cfg.RowsPerFile, "rows-per-file", cfg.RowsPerFile, "Parquet rows per file of (2)")
			fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "Brand's tar chunk size and the MDS shards' size limit")
			fs.Var((*cli.ByteSize)(&cfg.ParquetChunkSize), "parquet-chunk-size", "brand index --chunk-size for the Parquet dataset of (2): row groups of a file cut into chunks of about this (default: the gateway binary's)")
			fs.BoolVar(&cfg.ParquetSinglePut, "parquet-single-put", cfg.ParquetSinglePut, "upload each Parquet file of (2) in one PUT rather than in parts of 16 MiB, as a Hub mirror's are")
			fs.IntVar(&cfg.EmbeddingBytes, "embedding-bytes", cfg.EmbeddingBytes, "bytes a row of the Parquet embedding column, which the projected job leaves out")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per batch")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
			fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "alternations of the formats")
			fs.IntVar(&cfg.WarmEpochs, "warm-epochs", cfg.WarmEpochs, "(2): warm epochs read after the cold one, reported together")
			fs.IntVar(&cfg.StoreReplays, "store-replays", cfg.StoreReplays, "replays of each format's first cold epoch's GETs against MinIO alone, after the rounds")
			fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "(3): DataLoader workers")
			fs.BoolVar(&cfg.NoTorch, "no-torch", cfg.NoTorch, "skip (3)")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python with torch and boto3 for (3) (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3); (3) is skipped without one")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.StringVar(&cfg.GatewayProfiles, "gateway-profiles", "", "directory for a CPU profile of each gateway (gateway-formats-<format>-<round>.pprof)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data, the photos and the logs go (default: a temporary directory, removed)")
			return nil
		},
	}
}
