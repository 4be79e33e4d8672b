package task

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/go-json-experiment/json"

	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/s3backend"
)

// DefaultPlanBytes is the most memory a node's task plans hold at once
// by default: half the budget's base (memory.DefaultBase), in which they
// are counted beside the indexes and the rest of the process. About
// 2.3 million prompts at the default history.
const DefaultPlanBytes = 128 << 20

// PlanBytes is the memory a plan of spec holds for its prompts: each
// one's place, its history of answers, its ID in its domain and its
// weight in its domain's pool (NewPlan's arrays: 56 bytes a prompt at
// the default history of 4, TestPlanBytes), and the pass queue it sits
// in. Leases, steps kept and tallies are bounded by the spec's own
// bounds (ahead=, keep=), small beside it; prompts appended later are
// not counted.
//
// Plans were once outside the node's budget: 100 task jobs over a
// dataset of a million prompts took a node of --memory-limit 1GiB to
// 1,737 MiB (issue 98, item 9).
func PlanBytes(spec Spec) int64 {
	spec = spec.WithDefaults()
	perPrompt := int64(unsafe.Sizeof(prompt{})) + // its place
		4*int64(spec.History) + // its history (float32s)
		4 + // its ID in its domain's (uint32)
		8 + 8 + // its weight and the weight tree's node (uint64s)
		4 // the pass queue it is in (uint32)
	return int64(spec.Prompts)*perPrompt + planFixedBytes
}

// planFixedBytes is what a plan holds whatever its prompts: its spec,
// its step rule, its domains.
const planFixedBytes = 64 << 10

// readSpec reads task job job's spec from st: what its plan will hold
// is known before its log is read.
func readSpec(ctx context.Context, st Store, job string) (Spec, error) {
	b, err := editproto.ReadObject(ctx, st, specKey(job), 1<<16)
	if errors.Is(err, s3backend.ErrNotFound) {
		return Spec{}, fmt.Errorf("%w: no task job %q (PUT /tasks/%s makes one)", ErrUnknownJob, job, job)
	}
	if err != nil {
		return Spec{}, fmt.Errorf("%w: reading task job %s's spec: %w", ErrStore, job, err)
	}
	var spec Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return Spec{}, fmt.Errorf("task job %s's spec is damaged in the store: %v", job, err)
	}
	return spec.WithDefaults(), nil
}

// tooLarge is the refusal of a plan larger than every plan a node holds.
func tooLarge(job string, spec Spec, need, most int64) error {
	return fmt.Errorf("%w: task job %s's plan of %d prompts takes %d MiB of memory, more than the %d MiB this node holds task plans in (brand serve --task-plan-bytes)",
		ErrBadSpec, job, spec.Prompts, need>>20, most>>20)
}
