package main

import (
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/lance"
	"github.com/brandgw/brand/format/mds"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/format/video"
)

// formats are the formats of datasets served in place that `brand index`
// recognises and `brand serve` reads (package format): the one table of
// them, which the commands pass to the packages that need it.
func formats() []format.Format {
	return []format.Format{parquet.Format{}, mds.Format{}, megatron.Format{}, video.Format{}, video.LeRobotFormat{}, lance.Format{}}
}
