package clips

import (
	"fmt"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/cache/gopcache"
	"github.com/brandgw/brand/shuffle/gopshuffle"
)

// A clip job's decode horizons (gopcache.Horizon): the runs of an epoch's
// positions whose clips' GOPs the clip stage decodes once for all of them.
// In the default order a horizon is a window (its clips are uniformly
// mixed, so a GOP's clips are anywhere in it); in the GOP-then-sample
// order (gop_window=) a GOP window, whose clips are those of its groups
// alone. A horizon's plan — which of its clips want which frames of each
// GOP — is drawn once (every clip of the window) and kept.

// maxMemoWindowPlans bounds the windows' plans kept: each holds a use a
// clip and GOP of its window.
const maxMemoWindowPlans = 64

type windowPlanKey struct {
	s     layout.Stream
	epoch uint64
	w     int
}

// windowPlan is one window's horizons.
type windowPlan struct {
	starts   []int // epoch positions: horizon k is [starts[k], starts[k+1])
	horizons []*gopcache.Horizon
}

// horizon is the horizon holding epoch position pos, nil if none.
func (p *windowPlan) horizon(pos int) *gopcache.Horizon {
	k, _ := slices.BinarySearch(p.starts, pos+1)
	if k == 0 || k > len(p.horizons) {
		return nil
	}
	return p.horizons[k-1]
}

func newWindowPlans() *lru.Cache[windowPlanKey, *windowPlan] {
	c, _ := lru.New[windowPlanKey, *windowPlan](maxMemoWindowPlans)
	return c
}

// gopWindow is window w of the order in GOP-then-sample order, with its
// GOP windows' starts (in the window); in the default order, the window
// as shuffle orders it, one GOP window of it all.
func (c *clipOrder) gopWindow(w int) (gopshuffle.Window, error) {
	if c.gop == 0 {
		ids := c.Epoch.Window(w)
		return gopshuffle.Window{IDs: ids, Starts: []int{0, len(ids)}}, nil
	}
	var ids []int
	var groups []uint64
	// The shuffle's units of the window (clipOrder.WindowChunks are the
	// layout chunks its clips need).
	for _, u := range c.Epoch.WindowChunks(w) {
		for n := c.first[u]; n < c.first[u+1]; n++ {
			ids = append(ids, n)
			groups = append(groups, c.groups[n])
		}
	}
	return gopshuffle.Permute(ids, groups, c.seed, c.epoch, w, c.gop)
}

// Window is window w's clips in the job's order: GOP then sample with
// gop_window=, else the shuffle's.
func (c *clipOrder) Window(w int) []int {
	if c.gop == 0 {
		return c.Epoch.Window(w)
	}
	g, err := c.gopWindow(w)
	if err != nil {
		// Its arguments were checked when the order was made.
		panic(fmt.Sprintf("clips: window %d: %v", w, err))
	}
	return g.IDs
}

// gopGroup is a clip's group in the GOP-then-sample order (docs/shuffle.md
// §17): its first GOP (its first video's first), numbered among every GOP
// of the dataset by base (gopBase).
func gopGroup(base []int, c clips.Clip) uint64 {
	if len(c.GOPs) == 0 {
		return 0
	}
	g := c.GOPs[0]
	return uint64(base[g.Video] + g.GOP)
}

// gopBase is each video's first GOP's number among every GOP of the
// dataset.
func gopBase(cs *ClipSpace) []int {
	d := cs.Dataset()
	base := make([]int, len(d.Videos)+1)
	for v := range d.Videos {
		base[v+1] = base[v] + len(d.Videos[v].Track.GOPs)
	}
	return base
}

// horizonOf is the decode horizon of the clip at epoch position pos of
// stream s's epoch, nil when the stream's order is not the clip job's
// own (an edited order) or pos is outside it.
func (u *Unit) horizonOf(s layout.Stream, epoch uint64, pos int) (*gopcache.Horizon, error) {
	eo, err := u.base.Epoch(s, epoch)
	if err != nil {
		return nil, err
	}
	co, ok := eo.Order.(*clipOrder)
	if !ok || pos < 0 || pos >= co.NumSamples() {
		return nil, nil
	}
	w := co.WindowOf(pos)
	k := windowPlanKey{s.Order(), epoch, w}
	if p, ok := u.plans.Get(k); ok {
		return p.horizon(pos), nil
	}
	p, err := u.windowPlan(s, epoch, co, w)
	if err != nil {
		return nil, err
	}
	u.plans.Add(k, p)
	return p.horizon(pos), nil
}

// windowPlan draws window w's clips and lays out its horizons' uses.
func (u *Unit) windowPlan(s layout.Stream, epoch uint64, co *clipOrder, w int) (*windowPlan, error) {
	cs, err := u.Space(s.DS, s.Space)
	if err != nil {
		return nil, err
	}
	d := cs.Dataset()
	gw, err := co.gopWindow(w)
	if err != nil {
		return nil, err
	}
	ws := co.WindowStart(w)
	p := &windowPlan{}
	for k := range len(gw.Starts) - 1 {
		start, end := ws+gw.Starts[k], ws+gw.Starts[k+1]
		uses := map[clips.GOP][]gopcache.Use{}
		for i := gw.Starts[k]; i < gw.Starts[k+1]; i++ {
			c, err := cs.Clip(s.Seed, epoch, gw.IDs[i])
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrClips, err)
			}
			for g, pts := range tensorize.GOPFrames(d, c) {
				uses[g] = append(uses[g], gopcache.Use{Pos: ws + i, Frames: pts})
			}
		}
		id := fmt.Sprintf("%s|seed=%d|window=%d|%s|epoch=%d|%d-%d", s.DS.ID(), s.Seed, s.Window, s.Space, epoch, start, end)
		p.starts = append(p.starts, start)
		p.horizons = append(p.horizons, &gopcache.Horizon{ID: id, Start: start, End: end,
			Uses: func(v, g int) []gopcache.Use { return uses[clips.GOP{Video: v, GOP: g}] }})
	}
	p.starts = append(p.starts, ws+len(gw.IDs))
	return p, nil
}

var _ layout.Order = (*clipOrder)(nil)
