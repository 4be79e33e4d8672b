package task

import (
	"fmt"
	"math"
	"time"

	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/internal/seeded"
)

// Bounds of a spec and of requests.
const (
	MaxStep   = 1 << 16 // prompts a step
	MaxAhead  = 1 << 10 // steps a generator may run ahead
	MaxWindow = 1 << 22 // prompts leased and not answered, at most
	MaxLease  = 1 << 14 // prompts a lease
	MaxTTL    = 24 * time.Hour
	MinTTL    = 100 * time.Millisecond
	MaxScores = 1 << 10 // scores an answer
	// MaxAnswerScores bounds the scores of one feedback request, so
	// that a segment stays a few MiB.
	MaxAnswerScores = 1 << 20
	MaxHistory      = 64
	MaxRetire       = 1 << 15
	MaxRedraws      = 1 << 10
	MaxPrompts      = 1 << 31
	MaxGenName      = 128
	// MaxRequestID bounds a lease request's ID (api.TaskLeaseRequest).
	MaxRequestID = 64
	DefaultTTL   = time.Minute
	DefaultKeep  = 4096
	MaxKeep      = 1 << 20
	DefaultStep  = 0 // step is required
)

// The rules of dynamic sampling (Spec.Flat): which groups do not count.
const (
	// FlatScores: a group whose scores are all equal (the default).
	FlatScores = "scores"
	// FlatPasses: a group whose answers all pass or all fail by
	// pass_score (DAPO's rule): scores 0.1 and 0.3 under a pass score of
	// 0.5 teach nothing either.
	FlatPasses = "passes"
)

// Spec is a task job's parameters, fixed when it is made (docs/tasks.md
// "PUT /tasks/{job}"). The fields a job is made with are stored as JSON;
// Made, Index, Prompts and Tag are set by the gateway.
type Spec struct {
	Seed      uint64   `json:"seed"`
	Step      int      `json:"step"`
	Policy    string   `json:"policy,omitempty"`
	Ahead     int      `json:"ahead,omitempty"`
	TTL       Duration `json:"ttl,omitempty"`
	Redraws   int      `json:"redraws,omitempty"`
	PassScore *float64 `json:"pass_score,omitempty"`
	// Flat is dynamic sampling's rule for a group that teaches nothing:
	// FlatScores (every score equal) or FlatPasses (DAPO's: every answer
	// passes, or every one fails, by PassScore).
	Flat        string      `json:"flat,omitempty"`
	History     int         `json:"history,omitempty"`
	Band        *[2]float64 `json:"band,omitempty"`
	Temperature *float64    `json:"temperature,omitempty"`
	Retire      int         `json:"retire,omitempty"`
	Revisit     float64     `json:"revisit,omitempty"`
	MaxLease    int         `json:"max_lease,omitempty"`
	// Keep is how many steps behind the trainer's are kept to be read
	// again (a trainer resumed from an older checkpoint); older ones are
	// in the log, and its replay.
	Keep int `json:"keep,omitempty"`
	// Domains, if set, are the job's prompt datasets, each a domain with
	// a ratio (domains.go): every step holds each domain's share of its
	// prompts within one. Without them the job's one domain is the
	// dataset it is made over.
	Domains []Domain `json:"domains,omitempty"`
	// DomainPasses is what a domain whose pass runs out does:
	// PassesOwn (the default), it starts its next pass on its own, its
	// prompts reshuffled; PassesShared, the job's pass ends, and every
	// domain starts its next.
	DomainPasses string `json:"domain_passes,omitempty"`

	// Set when the job is made: the dataset (the one its log is kept
	// in), its index version and prompts (a job of domains: every
	// domain's, summed), the time (Unix milliseconds) and the job's tag,
	// which prefixes its lease IDs.
	Dataset string `json:"dataset"`
	Index   string `json:"index"`
	Prompts int    `json:"prompts"`
	Made    int64  `json:"made"`
	Tag     string `json:"tag"`
}

// Duration is a time.Duration written as Go writes one ("60s").
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v <= 0 {
		// 0 is not "the default": leave the field out for that.
		return fmt.Errorf("%w: ttl=%s: %s to %s (leave ttl out for its default, %s)", ErrBadSpec, v, MinTTL, MaxTTL, DefaultTTL)
	}
	*d = Duration(v)
	return nil
}

// WithDefaults is s with every unset field at its default.
func (s Spec) WithDefaults() Spec {
	if s.Policy == "" {
		s.Policy = "uniform"
	}
	if s.Ahead == 0 {
		s.Ahead = 8
	}
	if s.TTL == 0 {
		s.TTL = Duration(DefaultTTL)
	}
	if s.PassScore == nil {
		s.PassScore = ptr(0.5)
	}
	if s.Flat == "" {
		s.Flat = FlatScores
	}
	if s.History == 0 {
		s.History = 4
	}
	if s.Band == nil {
		s.Band = &[2]float64{0.2, 0.8}
	}
	if s.Temperature == nil {
		s.Temperature = ptr(0.1)
	}
	if s.MaxLease == 0 {
		s.MaxLease = 1024
	}
	if s.Keep == 0 {
		s.Keep = DefaultKeep
	}
	if s.DomainPasses == "" {
		s.DomainPasses = PassesOwn
	}
	return s
}

func ptr(v float64) *float64 { return &v }

// Check refuses a spec (with its defaults) out of its bounds.
func (s Spec) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadSpec, fmt.Sprintf(format, a...))
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case s.Step < 1 || s.Step > MaxStep:
		return bad("step=%d: a step holds 1 to %d prompts (step is required)", s.Step, MaxStep)
	case policies[s.Policy] == nil:
		return bad("policy=%s: one of %s", quote.Input(s.Policy), policyNames())
	case s.Ahead < 1 || s.Ahead > MaxAhead:
		return bad("ahead=%d: 1 to %d steps", s.Ahead, MaxAhead)
	case int64(s.Ahead)*int64(s.Step) > MaxWindow:
		return bad("ahead × step = %d prompts leased at once: at most %d", int64(s.Ahead)*int64(s.Step), MaxWindow)
	case time.Duration(s.TTL) < MinTTL || time.Duration(s.TTL) > MaxTTL:
		return bad("ttl=%s: %s to %s", time.Duration(s.TTL), MinTTL, MaxTTL)
	case s.Redraws < 0 || s.Redraws > MaxRedraws:
		return bad("redraws=%d: 0 (off) to %d", s.Redraws, MaxRedraws)
	case !finite(*s.PassScore) || *s.PassScore < 0 || *s.PassScore > 1:
		return bad("pass_score=%v: in [0, 1]", *s.PassScore)
	case s.Flat != FlatScores && s.Flat != FlatPasses:
		return bad("flat=%s: %q (a group whose scores are all equal does not count) or %q (one whose answers all pass or all fail by pass_score, DAPO's)", quote.Input(s.Flat), FlatScores, FlatPasses)
	case s.History < 1 || s.History > MaxHistory:
		return bad("history=%d: 1 to %d answers", s.History, MaxHistory)
	case !finite(s.Band[0]) || !finite(s.Band[1]) || s.Band[0] < 0 || s.Band[1] > 1 || s.Band[0] > s.Band[1]:
		return bad("band=[%v, %v]: 0 ≤ lo ≤ hi ≤ 1", s.Band[0], s.Band[1])
	case !finite(*s.Temperature) || *s.Temperature <= 0 || *s.Temperature > 100:
		return bad("temperature=%v: in (0, 100]", *s.Temperature)
	case s.Retire < 0 || s.Retire > MaxRetire:
		return bad("retire=%d: 0 (never) to %d solves", s.Retire, MaxRetire)
	case !finite(s.Revisit) || s.Revisit < 0 || s.Revisit > 1:
		return bad("revisit=%v: in [0, 1]", s.Revisit)
	case s.Keep < 1 || s.Keep > MaxKeep:
		return bad("keep=%d: 1 to %d steps", s.Keep, MaxKeep)
	case s.MaxLease < 1 || s.MaxLease > MaxLease:
		return bad("max_lease=%d: 1 to %d prompts", s.MaxLease, MaxLease)
	case s.Prompts < 0 || int64(s.Prompts) > MaxPrompts:
		return bad("a task job's dataset holds %d prompts: at most %d", s.Prompts, int64(MaxPrompts))
	case s.DomainPasses != PassesOwn && s.DomainPasses != PassesShared:
		return bad("domain_passes=%s: %q (a domain that runs out starts its next pass on its own) or %q (the job's pass ends, every domain starts its next)", quote.Input(s.DomainPasses), PassesOwn, PassesShared)
	}
	return checkDomains(s)
}

// SameAsked reports whether s and o were asked with the same parameters
// (what a job is made with, defaults applied), whatever was set when
// each was made.
func (s Spec) SameAsked(o Spec) bool {
	a, b := s.WithDefaults(), o.WithDefaults()
	return a.Seed == b.Seed && a.Step == b.Step && a.Policy == b.Policy && a.Ahead == b.Ahead &&
		a.TTL == b.TTL && a.Redraws == b.Redraws && *a.PassScore == *b.PassScore && a.Flat == b.Flat && a.History == b.History &&
		*a.Band == *b.Band && *a.Temperature == *b.Temperature && a.Retire == b.Retire && a.Revisit == b.Revisit &&
		a.MaxLease == b.MaxLease && a.Keep == b.Keep && a.DomainPasses == b.DomainPasses && sameDomains(a.Domains, b.Domains)
}

// TagOf is the tag of a job named job made at made (Unix ms) over index:
// eight hex digits, so that a lease ID of one job is never taken for
// another's, nor for the same name's made again.
func TagOf(job, index string, made int64) string {
	h := seeded.Mix64(0x7461736b00000001 ^ uint64(made))
	for _, s := range []string{job, "\x00", index} {
		for i := 0; i < len(s); i++ {
			h = seeded.Mix64(h ^ uint64(s[i]))
		}
	}
	return fmt.Sprintf("%08x", uint32(h>>32))
}
