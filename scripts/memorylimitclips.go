//go:build ignore

// memorylimitclips.go writes the LeRobot-shaped dataset
// scripts/memory-limit-clips.sh measures a node's peak memory on (go run
// scripts/memorylimitclips.go -dir DIR -episodes N -seconds S): N
// episodes of S seconds, three cameras at 640×480 and 30 fps, H.264 with
// a keyframe every 2 s (videotest.LeRobotShaped), written by ffmpeg, the
// Parquet by DuckDB (scripts/ensure-duckdb.sh).
package main

import (
	"context"
	"flag"
	"log"
	"os"

	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

func main() {
	dir := flag.String("dir", "", "where to write the dataset")
	episodes := flag.Int("episodes", 4, "episodes")
	seconds := flag.Int("seconds", 10, "each episode's length")
	flag.Parse()
	if *dir == "" {
		log.Fatal("give -dir")
	}
	node, modules, err := nodetest.Locate(nodetest.DuckDB)
	if err != nil {
		log.Fatal(err)
	}
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	lengths := make([]int, *episodes)
	for e := range lengths {
		lengths[e] = 30 * *seconds
	}
	if _, err := videotest.WriteLeRobot(context.Background(), root, node, modules, *dir, videotest.LeRobotShaped(lengths...)); err != nil {
		log.Fatal(err)
	}
}
