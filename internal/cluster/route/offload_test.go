package route

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/transport"
)

// states are peers known by their last states alone, every one up.
type states map[int]*nodestate.State

func (s states) Up(int) bool                       { return true }
func (s states) State(k int) *nodestate.State      { return s[k] }
func (s states) Answered(int) time.Time            { return time.Now() }
func (s states) Holds(int, string, string) bool    { return true }
func (s states) Answers(context.Context, int) bool { return true }
func (s states) Hedged(int, time.Time, bool)       {}
func (s states) Fetch(context.Context, int, transport.Request) (transport.Reply, error) {
	return transport.Reply{}, errors.New("no fetch in this test")
}

// TestTransformAt: a node asks an owner for tensors only if the owner's
// last state names the pipeline with the same fingerprint and its
// transform queue is not longer than this node's by more than
// OffloadSlack; otherwise it asks for the samples as stored.
func TestTransformAt(t *testing.T) {
	t0 := transport.Transform{Name: "tiny", Fingerprint: "0123456789abcdef"}
	own := nodestate.Load{Queued: 10, Workers: 2, PerImage: 2 * time.Millisecond} // a 10 ms wait
	tests := []struct {
		name  string
		state *nodestate.State
		want  bool
	}{
		{"not probed yet", nil, false},
		{"another fingerprint", &nodestate.State{Transforms: map[string]string{"tiny": "fedcba9876543210"}}, false},
		{"no such pipeline (an older node)", &nodestate.State{}, false},
		{"the same, no load said", &nodestate.State{Transforms: map[string]string{"tiny": t0.Fingerprint}}, true},
		{"idle", &nodestate.State{Transforms: map[string]string{"tiny": t0.Fingerprint}, Load: &nodestate.Load{Workers: 2}}, true},
		{"busier within the slack", &nodestate.State{Transforms: map[string]string{"tiny": t0.Fingerprint},
			Load: &nodestate.Load{Queued: 20, Workers: 2, PerImage: 2 * time.Millisecond}}, true}, // 20 ms ≤ 10 + 10
		{"busier past the slack", &nodestate.State{Transforms: map[string]string{"tiny": t0.Fingerprint},
			Load: &nodestate.Load{Queued: 22, Workers: 2, PerImage: 2 * time.Millisecond}}, false}, // 22 ms > 20
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const b = 1
			s := New(Config{Self: "http://a.invalid", Peers: states{b: tc.state}, Registry: prometheus.NewRegistry(),
				Log: zerolog.Nop(), Load: func() nodestate.Load { return own }})
			defer s.Close()
			if got := s.transformAt(b, t0); got != tc.want {
				t.Errorf("transformAt %t, want %t", got, tc.want)
			}
			o := s.originFor(b, &transport.Origin{Transform: t0}, 4)
			if o.Transform.On() != tc.want {
				t.Errorf("asked with %+v", o.Transform)
			}
		})
	}
}
