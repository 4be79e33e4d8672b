package httperr_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/units/clips"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

func TestStatusAndPublic(t *testing.T) {
	tests := []struct {
		err    error
		status int
		public bool // a message other than the error's own
	}{
		{fmt.Errorf("x: %w", query.ErrBadRequest), http.StatusBadRequest, false},
		{fmt.Errorf("x: %w", catalog.ErrUnknown), http.StatusNotFound, false},
		{fmt.Errorf("x: %w", catalog.ErrNotReady), http.StatusServiceUnavailable, false},
		{fmt.Errorf("x: %w", httperr.ErrStalled), http.StatusServiceUnavailable, false},
		{fmt.Errorf("x: %w", chunkcache.ErrBusy), http.StatusServiceUnavailable, false},
		{fmt.Errorf("s3://bucket/p: %w", s3backend.ErrUnavailable), http.StatusServiceUnavailable, true},
		{fmt.Errorf("/data/x: %w", s3backend.ErrChanged), http.StatusBadGateway, true},
		// A file served in place whose bytes fail the index's checksums.
		{fmt.Errorf("bytes 0+10 of /data/a.parquet: %w", stored.ErrChecksum), http.StatusBadGateway, true},
		// A chunk that fails its checksum alike on every read is damaged
		// at rest; differently each time, a bad link (catalog.Loader).
		{&catalog.DamagedChunkError{Reads: 3, Err: fmt.Errorf("/data/chunks/000001.tar: %w", catalog.ErrCorrupt)}, http.StatusBadGateway, true},
		{fmt.Errorf("/data/chunks/000001.tar: %w: %w", s3backend.ErrUnavailable, catalog.ErrCorrupt), http.StatusServiceUnavailable, true},
		// An object shorter than its index says: the store does not
		// match the index (it answered 500, "internal error").
		{fmt.Errorf("s3://b/p/chunks/000063.tar: %w", s3backend.ErrOutOfRange), http.StatusBadGateway, true},
		{fmt.Errorf("x: %w", httperr.ErrNotImplemented), http.StatusNotImplemented, false},
		{fmt.Errorf("x: %w", httperr.ErrPlanBusy), http.StatusServiceUnavailable, false},
		{fmt.Errorf("x: %w", api.ErrPlanBudget), http.StatusServiceUnavailable, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), http.StatusGatewayTimeout, true},
		{fmt.Errorf("x: %w", context.Canceled), 499, false}, // the client went away: only a log sees it
		{errors.New("/etc/secret: permission denied"), http.StatusInternalServerError, true},
		{fmt.Errorf("x: %w", transform.ErrUnknownPipeline), http.StatusBadRequest, false},
		{fmt.Errorf("x: %w", tensorize.ErrTooLarge), http.StatusBadRequest, false},
		{fmt.Errorf("sample x: %w", transform.ErrDecode), http.StatusUnprocessableEntity, false},
		{fmt.Errorf("sample x: %w", transform.ErrTooLarge), http.StatusUnprocessableEntity, false},
		{fmt.Errorf("x: %w", tensorize.ErrClosed), http.StatusServiceUnavailable, false},
		{fmt.Errorf("x: %w", tensorize.ErrBusy), http.StatusServiceUnavailable, false},
		{fmt.Errorf("x: %w", feedback.ErrBadFeedback), http.StatusBadRequest, false},
		{fmt.Errorf("x: %w", feedback.ErrBusy), http.StatusServiceUnavailable, false},
		// A balanced job's global batch too costly to weigh (balance=).
		{fmt.Errorf("x: %w", balance.ErrInvalid), http.StatusBadRequest, false},
		// Videos: a build without libavcodec, an unsupported codec, frames
		// over the bound, packets that do not decode, a bad clip request.
		{fmt.Errorf("x: %w", video.ErrNoDecoder), http.StatusNotImplemented, false},
		{fmt.Errorf("x.mp4: %w \"mpeg4\"", video.ErrCodec), http.StatusUnprocessableEntity, false},
		{fmt.Errorf("x.mp4: %w", video.ErrTooLarge), http.StatusUnprocessableEntity, false},
		{fmt.Errorf("x.mp4: %w", video.ErrDecode), http.StatusUnprocessableEntity, false},
		{fmt.Errorf("x.mp4: %w", video.ErrRun), http.StatusUnprocessableEntity, false},
		{fmt.Errorf("x: %w", clips.ErrClips), http.StatusBadRequest, false},
	}
	for _, tt := range tests {
		status := httperr.Status(tt.err)
		if status != tt.status {
			t.Errorf("Status(%v) = %d, want %d", tt.err, status, tt.status)
		}
		if got := httperr.Public(status, tt.err) != ""; got != tt.public {
			t.Errorf("Public(%d, %v) replaces the message: %v, want %v", status, tt.err, got, tt.public)
		}
	}
}

// A chunk damaged at rest is told to the client by the dataset, the
// chunk and the cause, which name no store, path or endpoint.
func TestPublicDamagedChunk(t *testing.T) {
	err := fmt.Errorf("reading /srv/data/train.parquet: %w", &catalog.DamagedChunkError{
		Key:   chunkcache.Key{Dataset: "hub", Object: "data/train-00000-of-00001.parquet#0"},
		Reads: 3, Err: fmt.Errorf("/srv/data: %w", catalog.ErrCorrupt),
		Cause: `it does not decode: damaged chunk: data/train-00000-of-00001.parquet, row group of rows 0–59, column "image": page 1 does not decompress`,
	})
	status := httperr.Status(err)
	msg := httperr.Public(status, err)
	if status != http.StatusBadGateway {
		t.Fatalf("status %d", status)
	}
	for _, says := range []string{"dataset hub", "chunk data/train-00000-of-00001.parquet#0", "does not decompress", "all 3 reads"} {
		if !strings.Contains(msg, says) {
			t.Errorf("%q does not say %q", msg, says)
		}
	}
	if strings.Contains(msg, "/srv") {
		t.Errorf("%q names a local path", msg)
	}
}

func TestNote(t *testing.T) {
	httperr.NoteError(context.Background(), errors.New("no note: nothing happens"))
	ctx, n := httperr.WithNote(context.Background())
	err := errors.New("behind the 500")
	httperr.NoteError(ctx, err)
	httperr.NoteRoute(ctx, "s3:GetObject")
	httperr.NoteReason(ctx, "internal")
	if n.Err() != err || n.Route() != "s3:GetObject" || n.Reason() != "internal" {
		t.Fatalf("note: %v %q %q", n.Err(), n.Route(), n.Reason())
	}
}

// TestReason: the errors an operator tells apart by name, any other by
// its status, an answer with no error noted by its status alone.
func TestReason(t *testing.T) {
	tests := []struct {
		status int
		err    error
		want   string
	}{
		{503, fmt.Errorf("x: %w", chunkcache.ErrBusy), "cache_busy"},
		{503, fmt.Errorf("x: %w", tensorize.ErrBusy), "transform_busy"},
		{503, fmt.Errorf("x: %w", catalog.ErrNotReady), "not_ready"},
		{503, fmt.Errorf("x: %w", httperr.ErrStalled), "stalled"},
		{503, fmt.Errorf("s3://b/p: %w", s3backend.ErrUnavailable), "store_unavailable"},
		{503, fmt.Errorf("x: %w", jobsched.ErrUnasked), "member_unasked"},
		{400, fmt.Errorf("x: %w", chunkcache.ErrTooLarge), "too_large"},
		{400, fmt.Errorf("x: %w", tensorize.ErrTooLarge), "too_large"},
		{400, fmt.Errorf("x: %w", query.ErrBadRequest), "bad_request"},
		{400, fmt.Errorf("x: %w", transform.ErrUnknownPipeline), "unknown_pipeline"},
		{422, fmt.Errorf("sample x: %w", transform.ErrDecode), "bad_image"},
		{422, fmt.Errorf("x.mp4: %w", video.ErrDecode), "bad_video"},
		{501, fmt.Errorf("x: %w", video.ErrNoDecoder), "no_video_decoder"},
		{502, fmt.Errorf("x: %w", s3backend.ErrChanged), "store_mismatch"},
		{502, fmt.Errorf("x: %w", stored.ErrChecksum), "store_mismatch"},
		{502, fmt.Errorf("x: %w", &catalog.DamagedChunkError{Reads: 3, Err: catalog.ErrCorrupt}), "damaged_chunk"},
		{502, fmt.Errorf("x: %w", catalog.ErrCorrupt), "store_mismatch"},
		{504, fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{500, errors.New("anything else"), "internal"},
		{401, nil, "unauthenticated"},
		{404, nil, "not_found"},
		{405, nil, "method_not_allowed"},
		{418, nil, "status_418"},
	}
	for _, tt := range tests {
		if got := httperr.Reason(tt.status, tt.err); got != tt.want {
			t.Errorf("Reason(%d, %v) = %q, want %q", tt.status, tt.err, got, tt.want)
		}
		if tt.err != nil && httperr.Status(tt.err) != tt.status {
			t.Errorf("the case %v is answered %d, not %d", tt.err, httperr.Status(tt.err), tt.status)
		}
	}
}
