package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cluster/hedge"
	"github.com/brandgw/brand/internal/cluster/membership"
)

// clusterFlags place a gateway in a cluster (docs/scale-out.md): its
// members from one of three sources, and its own URL among them.
type clusterFlags struct {
	peers       string
	peersFile   string
	peersDNS    string
	peersPoll   time.Duration
	self        int
	advertise   string
	peerTimeout time.Duration
	hedgeRate   float64
	hedgeFloor  time.Duration
	hedgeCeil   time.Duration
	secretFile  string
	flipTimeout time.Duration
	leave       time.Duration
}

func (f *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.peers, "peers", "", "a fixed cluster's gateways: comma-separated base URLs, or a StatefulSet pattern such as http://brand-{0..3}.brand.ns.svc:8080 (the order does not matter; every node must list the same set)")
	fs.StringVar(&f.peersFile, "peers-file", "", "a file listing the cluster's gateways as --peers does (commas or lines, # comments), reread every --peers-poll: edit it, or mount a ConfigMap, to add or remove nodes at runtime")
	fs.StringVar(&f.peersDNS, "peers-dns", "", "a Kubernetes headless Service's DNS name (brand.NAMESPACE.svc.cluster.local): its SRV records for the port named http list the pods by their stable names, polled every --peers-poll, so that kubectl scale changes the cluster")
	fs.DurationVar(&f.peersPoll, "peers-poll", 2*time.Second, "how often --peers-file or --peers-dns is read")
	fs.IntVar(&f.self, "self", -1, "this node's position in --peers as written (or give --advertise)")
	fs.StringVar(&f.advertise, "advertise", "", "this node's URL as the members are listed (e.g. http://$(POD_NAME).brand.ns.svc.cluster.local:8080); required with --peers-file and --peers-dns")
	fs.DurationVar(&f.peerTimeout, "peer-timeout", gateway.DefaultPeerTimeout, "bound on one sample fetch from a peer; past it the samples come from the next node or the store")
	fs.Float64Var(&f.hedgeRate, "peer-hedge-rate", hedge.DefaultRate, "hedges a second at most (bursts of as many): a sample fetch from a peer not answered within the hedge deadline is also asked of the next node of its chunks' ranking, or read from the store, and the first answer wins; 0 turns hedging off (a fetch waits up to --peer-timeout)")
	fs.DurationVar(&f.hedgeFloor, "peer-hedge-floor", hedge.DefaultFloor, "the hedge deadline's floor: it is learnt from the peers' recent answers (three times their 95th percentile), never shorter than this")
	fs.DurationVar(&f.hedgeCeil, "peer-hedge-ceiling", hedge.DefaultCeiling, "the hedge deadline's ceiling, and the deadline before enough answers are observed: the longest a step waits on a peer that stopped answering while hedges are left in the budget")
	fs.DurationVar(&f.flipTimeout, "membership-flip-timeout", membership.DefaultFlipTimeout, "bound on a membership change on this node: loading the chunks it gains that the jobs need soon, then waiting for the other gaining nodes, after which it moves to the new membership anyway; and on how long, at start, it waits for a member that answers but is not ready before it reports ready")
	fs.DurationVar(&f.leave, "leave-timeout", DefaultLeaveTimeout, "on SIGTERM, a cluster node hands its chunks over and waits for the cluster to agree on a membership without it for at most this long, then drains for --shutdown-timeout; keep both inside the platform's grace period (terminationGracePeriodSeconds)")
	fs.StringVar(&f.secretFile, "peer-secret-file", "", "the secret every node of the cluster is given (at least 16 bytes); the peers' internal requests carry credentials derived from it, and only those are served. Required with --auth-token-file")
}

// DefaultLeaveTimeout is --leave-timeout's default: the flip timeout of
// the nodes gaining the leaver's chunks, and a few probes.
const DefaultLeaveTimeout = membership.DefaultFlipTimeout + 5*time.Second

// minPeerSecret is the shortest peer secret accepted.
const minPeerSecret = 16

// config resolves the flags, reading the peer secret.
func (f *clusterFlags) config() (gateway.ClusterConfig, error) {
	cc, err := f.layout()
	if err != nil || cc.Members == nil {
		return cc, err
	}
	cc.Secret, err = f.secret()
	return cc, err
}

// layout resolves the member source and this node's URL among the
// members: the first list of a file or DNS is read when the gateway
// starts, not here, since the Service may not list this pod yet.
func (f *clusterFlags) layout() (gateway.ClusterConfig, error) {
	sources := 0
	for _, s := range []string{f.peers, f.peersFile, f.peersDNS} {
		if s != "" {
			sources++
		}
	}
	switch {
	case sources == 0:
		return gateway.ClusterConfig{}, nil
	case sources > 1:
		return gateway.ClusterConfig{}, fmt.Errorf("%w: give one of --peers, --peers-file and --peers-dns", cluster.ErrConfig)
	case f.peersPoll <= 0:
		return gateway.ClusterConfig{}, fmt.Errorf("%w: --peers-poll must be positive", cluster.ErrConfig)
	}
	if f.flipTimeout <= 0 || f.leave < 0 {
		return gateway.ClusterConfig{}, fmt.Errorf("%w: --membership-flip-timeout must be positive and --leave-timeout not negative", cluster.ErrConfig)
	}
	if f.hedgeRate < 0 || f.hedgeFloor <= 0 || f.hedgeCeil < f.hedgeFloor {
		return gateway.ClusterConfig{}, fmt.Errorf("%w: --peer-hedge-rate must not be negative, --peer-hedge-floor must be positive and --peer-hedge-ceiling at least the floor", cluster.ErrConfig)
	}
	rate := f.hedgeRate
	if rate == 0 {
		rate = -1 // hedge.Config: none
	}
	cc := gateway.ClusterConfig{PeerTimeout: f.peerTimeout, MembersPoll: f.peersPoll, FlipTimeout: f.flipTimeout,
		Hedge: hedge.Config{Rate: rate, Floor: f.hedgeFloor, Ceiling: f.hedgeCeil}}
	if f.peers != "" {
		peers, err := cluster.ParsePeers(f.peers)
		if err != nil {
			return gateway.ClusterConfig{}, err
		}
		self, err := cluster.Self(peers, f.self, f.advertise)
		if err != nil {
			return gateway.ClusterConfig{}, err
		}
		cc.Members, cc.Advertise = membership.Static(peers), peers[self]
		return cc, nil
	}
	if f.self >= 0 {
		return gateway.ClusterConfig{}, fmt.Errorf("%w: --self is a position in --peers; with --peers-file or --peers-dns give --advertise", cluster.ErrConfig)
	}
	if f.advertise == "" {
		return gateway.ClusterConfig{}, fmt.Errorf("%w: with --peers-file or --peers-dns, say which member this node is (--advertise URL)", cluster.ErrConfig)
	}
	self, err := cluster.NewMembership([]string{f.advertise})
	if err != nil {
		return gateway.ClusterConfig{}, fmt.Errorf("--advertise: %w", err)
	}
	cc.Advertise = self.Members()[0]
	if f.peersFile != "" {
		cc.Members = membership.File(f.peersFile)
		return cc, nil
	}
	u, _ := url.Parse(cc.Advertise)
	cc.Members = membership.DNS{Name: f.peersDNS, Scheme: u.Scheme}
	return cc, nil
}

// secret reads --peer-secret-file: its bytes, surrounding white space
// trimmed.
func (f *clusterFlags) secret() ([]byte, error) {
	if f.secretFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(f.secretFile)
	if err != nil {
		return nil, fmt.Errorf("--peer-secret-file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < minPeerSecret {
		return nil, fmt.Errorf("--peer-secret-file %s: the secret must be at least %d bytes (e.g. openssl rand -hex 32)", f.secretFile, minPeerSecret)
	}
	return b, nil
}

// errPeerSecretAlone is a peer secret given without --peers.
var errPeerSecretAlone = errors.New("--peer-secret-file is for a cluster: give --peers, --peers-file or --peers-dns too")
