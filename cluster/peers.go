package cluster

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrConfig reports a peer list or self reference that cannot describe a
// cluster. The wrapping error says what is wrong.
var ErrConfig = errkind.New(errkind.Internal, "cluster: invalid configuration")

// maxNodes bounds a peer list: ownership and assignment cost O(nodes) per
// chunk and per batch.
const maxNodes = 4096

// pattern is a StatefulSet-style range, {0..3}, expanded in place.
var pattern = regexp.MustCompile(`\{(\d+)\.\.(\d+)\}`)

// ParsePeers parses a peer list: comma-separated base URLs, node k being
// the k-th. An element may hold one range {a..b}, which expands to b-a+1
// URLs with a, a+1, …, b in its place, so that
// http://brand-{0..3}.brand.ns.svc:8080 names a StatefulSet's four pods in
// ordinal order. URLs must be http or https with a host, and distinct.
func ParsePeers(spec string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, el := range strings.Split(spec, ",") {
		el = strings.TrimSpace(el)
		if el == "" {
			continue
		}
		urls, err := expand(el)
		if err != nil {
			return nil, err
		}
		for _, u := range urls {
			n, err := normalize(u)
			if err != nil {
				return nil, err
			}
			if seen[n] {
				return nil, fmt.Errorf("%w: peer %s is listed twice", ErrConfig, n)
			}
			seen[n] = true
			out = append(out, n)
			if len(out) > maxNodes {
				return nil, fmt.Errorf("%w: more than %d peers", ErrConfig, maxNodes)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the peer list %q names no peer", ErrConfig, spec)
	}
	return out, nil
}

func expand(el string) ([]string, error) {
	m := pattern.FindAllStringSubmatchIndex(el, -1)
	if len(m) == 0 {
		return []string{el}, nil
	}
	if len(m) > 1 {
		return nil, fmt.Errorf("%w: %q holds more than one {a..b} range", ErrConfig, el)
	}
	lo, err1 := strconv.Atoi(el[m[0][2]:m[0][3]])
	hi, err2 := strconv.Atoi(el[m[0][4]:m[0][5]])
	if err1 != nil || err2 != nil || hi < lo || hi-lo >= maxNodes {
		return nil, fmt.Errorf("%w: range in %q must be {a..b} with a <= b and at most %d values", ErrConfig, el, maxNodes)
	}
	out := make([]string, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		out = append(out, el[:m[0][0]]+strconv.Itoa(i)+el[m[0][1]:])
	}
	return out, nil
}

// normalize checks a peer URL and drops a trailing slash.
func normalize(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: peer %q is not an http(s)://host[:port][/path] URL", ErrConfig, s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Self finds this node in peers: self if it is >= 0, else the position of
// the URL advertise (compared after the same normalisation).
func Self(peers []string, self int, advertise string) (int, error) {
	if self >= 0 {
		if self >= len(peers) {
			return 0, fmt.Errorf("%w: self %d is outside the %d peers", ErrConfig, self, len(peers))
		}
		return self, nil
	}
	if advertise == "" {
		return 0, fmt.Errorf("%w: with peers, say which one this node is (--self K or --advertise URL)", ErrConfig)
	}
	a, err := normalize(advertise)
	if err != nil {
		return 0, err
	}
	for k, p := range peers {
		if p == a {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: advertised URL %s is not among the peers %v", ErrConfig, a, peers)
}
