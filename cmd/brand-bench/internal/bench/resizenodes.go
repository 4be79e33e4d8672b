package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/testsupport/promtest"
)

// The resize benchmark's clusters: their counters, ports, member file and
// agreement.

// lastChanges adds to ch what the live nodes' GET /cluster say of their
// last change to membership version to.
func lastChanges(ctx context.Context, hc *http.Client, urls []string, live map[int]bool, to string, ch *ResizeChange) error {
	for k := range live {
		var cl api.Cluster
		if err := getJSON(ctx, hc, urls[k]+"/cluster", &cl); err != nil {
			return err
		}
		c := cl.LastChange
		if c == nil || c.To != to {
			continue
		}
		ch.Nodes++
		ch.WarmSeconds = max(ch.WarmSeconds, c.WarmSeconds)
		ch.FlipSeconds = max(ch.FlipSeconds, c.FlipSeconds)
		ch.AgreeSeconds = max(ch.AgreeSeconds, c.AgreeSeconds)
		ch.Chunks += c.Chunks
		ch.PeerBytes += c.PeerBytes
		ch.StoreBytes += c.StoreBytes + c.DiskBytes
	}
	return nil
}

// resizeCounters are a cluster's counters summed over its nodes.
type resizeCounters struct {
	store, gets, peer, delivered float64
	membership                   map[string]float64
}

func countersOf(m promtest.Scrape) resizeCounters {
	c := resizeCounters{membership: map[string]float64{}}
	for series, v := range m {
		name, _, _ := strings.Cut(series, "{")
		switch {
		case name == "brand_backend_read_bytes_total":
			c.store += v
		case name == "brand_backend_requests_total" && strings.Contains(series, `op="get"`):
			c.gets += v
		case name == "brand_peer_bytes_fetched_total":
			c.peer += v
		case name == "brand_locality_bytes_total":
			c.delivered += v
		case strings.HasPrefix(name, "brand_membership_") && strings.HasSuffix(name, "_total"):
			c.membership[series] += v
		}
	}
	return c
}

func (c *resizeCounters) add(o resizeCounters) {
	c.store += o.store
	c.gets += o.gets
	c.peer += o.peer
	c.delivered += o.delivered
	if c.membership == nil {
		c.membership = map[string]float64{}
	}
	for k, v := range o.membership {
		c.membership[k] += v
	}
}

func (c resizeCounters) clone() resizeCounters {
	out := c
	out.membership = map[string]float64{}
	for k, v := range c.membership {
		out.membership[k] = v
	}
	return out
}

func (c resizeCounters) minus(o resizeCounters) resizeCounters {
	out := resizeCounters{store: c.store - o.store, gets: c.gets - o.gets, peer: c.peer - o.peer, delivered: c.delivered - o.delivered,
		membership: map[string]float64{}}
	for k, v := range c.membership {
		if d := v - o.membership[k]; d != 0 {
			out.membership[k] = d
		}
	}
	return out
}

// loopbackPorts returns n loopback ports free when asked, in the order
// of their URLs as a membership sorts them. They are drawn below Linux's
// ephemeral range (32768–60999), as integration's freePorts draws them:
// an outgoing connection takes its local port from that range, and one
// that took a port between its probe's close and the node's bind would
// fail the node.
func loopbackPorts(n int) ([]int, error) {
	const from, to = 20000, 32768
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("bench: no %d free loopback ports in [%d, %d) after 1,000 tries", n, from, to)
		}
		port := from + rand.IntN(to-from)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		defer ln.Close()
		ports = append(ports, port)
	}
	slices.SortFunc(ports, func(a, b int) int { return strings.Compare(strconv.Itoa(a), strconv.Itoa(b)) })
	return ports, nil
}

func pick(urls []string, ks []int) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = urls[k]
	}
	return out
}

// writeMembers replaces the member file as an operator's tool would: a
// new file renamed over the old one, so that no poll reads half of it.
func writeMembers(path string, urls []string, ks []int) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(pick(urls, ks), "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// waitMembers waits until every live node agrees on the membership of
// members and sees every live member of it up, and every live node sees
// the members not live down.
func waitMembers(ctx context.Context, hc *http.Client, urls []string, live map[int]bool, members []int) error {
	ms, err := cluster.NewMembership(pick(urls, members))
	if err != nil {
		return err
	}
	want := ms.Version()
	for k := range live {
		for {
			var cl api.Cluster
			err := getJSON(ctx, hc, urls[k]+"/cluster", &cl)
			ok := err == nil && cl.Members == want
			for _, n := range cl.Nodes {
				j := slices.Index(urls, n.URL)
				switch {
				case !ok || j < 0:
				case live[j]:
					ok = n.Up && n.Members == want
				default:
					ok = !n.Up
				}
			}
			if ok {
				break
			}
			select {
			case <-ctx.Done():
				b, _ := json.Marshal(cl)
				return fmt.Errorf("bench: node %d does not agree on membership %s: %s (%v): %w", k, want, b, err, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
