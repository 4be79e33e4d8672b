package bench

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestFillZero: a zero configuration takes its default whole but for the
// fields whose zero is a value (zero:"kept"); a field given, and an empty
// list, stay as given.
func TestFillZero(t *testing.T) {
	t.Run("zero takes the default", func(t *testing.T) {
		tests := []struct {
			name      string
			got, want any
		}{
			{"jobs", fill(JobsConfig{}, DefaultJobsConfig()), DefaultJobsConfig()},
			{"mix", fill(MixConfig{}, DefaultMixConfig()), DefaultMixConfig()},
			{"resize", fill(ResizeConfig{}, DefaultResizeConfig()), DefaultResizeConfig()},
			{"schedule", fill(ScheduleConfig{}, DefaultScheduleConfig()), DefaultScheduleConfig()},
			{"formats", fill(FormatsConfig{}, DefaultFormatsConfig()), DefaultFormatsConfig()},
			{"s3face", fill(S3FaceConfig{}, DefaultS3FaceConfig()), DefaultS3FaceConfig()},
		}
		for _, tt := range tests {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("%s: got %+v, want %+v", tt.name, tt.got, tt.want)
			}
		}
	})
	t.Run("kept zeros", func(t *testing.T) {
		tensors := fill(TensorsConfig{}, DefaultTensorsConfig())
		if tensors.Workers != 0 || tensors.ZeroWorkers || tensors.DataCPU != 0 || tensors.Images != DefaultTensorsConfig().Images || tensors.Pipeline == "" {
			t.Errorf("tensors: %+v", tensors)
		}
		video := fill(VideoConfig{}, DefaultVideoConfig())
		if video.Workers != 0 || video.DataCPU != 0 || video.Videos != DefaultVideoConfig().Videos || video.Size == "" {
			t.Errorf("video: %+v", video)
		}
		tokens := fill(TokensConfig{}, DefaultTokensConfig())
		if tokens.WarmEpochs != 0 || tokens.FirstBatches != 0 || tokens.Seed != 0 || tokens.Documents != DefaultTokensConfig().Documents || len(tokens.Seqs) == 0 {
			t.Errorf("tokens: %+v", tokens)
		}
	})
	t.Run("given stays", func(t *testing.T) {
		got := fill(JobsConfig{Samples: 7, Pace: time.Second, CacheFractions: []float64{}, Harness: Harness{WorkDir: "w"}}, DefaultJobsConfig())
		if got.Samples != 7 || got.Pace != time.Second || got.CacheFractions == nil || len(got.CacheFractions) != 0 || got.WorkDir != "w" || got.Window != DefaultJobsConfig().Window {
			t.Errorf("got %+v", got)
		}
	})
}

func fill[C any](c, def C) C {
	fillZero(&c, def)
	return c
}

// TestHarnessCheck: every benchmark refuses to start without the binary
// it measures or a work directory, and discards its log by default.
func TestHarnessCheck(t *testing.T) {
	for _, tt := range []struct {
		h  Harness
		ok bool
	}{
		{Harness{GatewayBinary: "brand", WorkDir: "w"}, true},
		{Harness{WorkDir: "w"}, false},
		{Harness{GatewayBinary: "brand"}, false},
	} {
		err := tt.h.check()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%+v: %v", tt.h, err)
		}
		if tt.h.Log == nil {
			t.Errorf("%+v: no log", tt.h)
		}
	}
}
