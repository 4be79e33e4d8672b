package gateway

import (
	"context"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/internal/server/scope"
)

// visible is what a request's token may read of the figures /stats and
// /cluster show: the jobs, epochs and mixtures whose datasets and job its
// scope covers, and the index versions of those datasets alone. A job's
// figures name its dataset and its stream, a dataset's versions its
// store's state: a token scoped to jobs teamA-* and datasets a-* reads
// those of teamA-*'s jobs over a-* and no others'. The node's own
// figures (its cache, memory, transform workers, peers' traffic) are
// every job's at once and name none: every token with the read right
// sees them. A gateway without tokens, and an admin token, see all.
type visible struct {
	grant  scope.Grant
	scoped bool
}

// visibleTo is what the token of the request ctx belongs to may read.
func visibleTo(ctx context.Context) visible {
	g, ok := grantOf(ctx)
	return visible{grant: g, scoped: ok && g.Narrowed()}
}

// shown is livestats.Shown of the token: whether it may read the
// figures of job ("" for an unnamed job, which any jobs= covers, as a
// request naming no job is) reading datasets; nil for every job.
func (v visible) shown() livestats.Shown {
	if !v.scoped {
		return nil
	}
	return func(datasets []string, job string) bool { return v.grant.Allow(scope.Read, datasets, job) == nil }
}

// datasets are the names of names the token's scope covers.
func (v visible) datasets(names []string) []string {
	if !v.scoped {
		return names
	}
	var out []string
	for _, n := range names {
		if v.grant.Dataset(n) {
			out = append(out, n)
		}
	}
	return out
}

// mixtures are the mixtures of ms every component of which the token's
// datasets cover.
func (v visible) mixtures(ms []api.MixStat) []api.MixStat {
	if !v.scoped {
		return ms
	}
	var out []api.MixStat
next:
	for _, m := range ms {
		for _, c := range m.Components {
			if !v.grant.Dataset(c.Dataset) {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// cluster leaves out of c the index versions of datasets the token's
// scope does not cover: those its peers' probes listed (this node's own
// and the agreed versions are asked for the covered datasets alone).
func (v visible) cluster(c *api.Cluster) {
	if !v.scoped {
		return
	}
	for _, n := range c.Nodes {
		for d := range n.Indexes {
			if !v.grant.Dataset(d) {
				delete(n.Indexes, d)
			}
		}
	}
	for d := range c.Agreed {
		if !v.grant.Dataset(d) {
			delete(c.Agreed, d)
		}
	}
}

// clusterStats is cs (nil on a single gateway) with cluster's filter.
func (v visible) clusterStats(cs *api.ClusterStats) *api.ClusterStats {
	if cs != nil {
		v.cluster(&cs.Cluster)
	}
	return cs
}
