package api

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/shuffle"
)

// Query parameters of a mixture (docs/http-api.md, "Mixtures").
const (
	// ParamMix names a mixture's components and weights:
	// mix=web:0.7,code:0.2,books:0.1. It takes the place of dataset=.
	ParamMix = "mix"
	// ParamMixBlock is the mixing block K, the positions over which each
	// component's share is rounded (default: batch_size × world).
	ParamMixBlock = "mix_block"
	// ParamMixSamples is the mixture epoch's length in samples (default:
	// the components' sizes summed), rounded up to whole blocks.
	ParamMixSamples = "mix_samples"
)

// MaxMixWeightDecimals bounds the digits after a weight's decimal point
// in a mixture's text. The reduced weights' sum is bounded by
// shuffle.MaxMixWeightSum.
const MaxMixWeightDecimals = 6

// ErrMix marks a mixture that cannot be read.
var ErrMix = errkind.New(errkind.Internal, "invalid mixture")

// MixComponent is one component of a mixture: a dataset and its weight,
// as written (a positive decimal, such as 0.7, 7 or 2.5).
type MixComponent struct {
	Dataset string
	Weight  string
}

// Mix is a mixture of datasets: its components, in the order given. The
// order matters: it breaks ties of the rounding rule and numbers the
// components (docs/shuffle.md §11).
type Mix []MixComponent

// MaxDatasetName bounds a dataset's name, in bytes. A request naming a
// longer one (dataset=, a mixture's or a schedule's component, a task
// job's domain) is refused (400) before the name is looked up or carried
// further, and a gateway refuses to serve a dataset of a longer name, so
// that every name it knows can be given.
const MaxDatasetName = 128

// CheckDatasetName refuses a dataset's name longer than MaxDatasetName,
// quoting a bounded prefix of it.
func CheckDatasetName(name string) error {
	if len(name) > MaxDatasetName {
		return fmt.Errorf("a dataset name of %d bytes, %s: a dataset's name is at most %d", len(name), quote.Input(name), MaxDatasetName)
	}
	return nil
}

// ParseMix reads a mixture written as name:weight,name:weight,…: at least
// one component, names distinct and non-empty, weights positive decimals
// with at most MaxMixWeightDecimals digits after the point.
func ParseMix(s string) (Mix, error) {
	if s == "" {
		return nil, nil
	}
	var m Mix
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		name, w, ok := strings.Cut(part, ":")
		if !ok || name == "" || w == "" {
			return nil, fmt.Errorf("%w: %s: each component is dataset:weight, such as web:0.7", ErrMix, quote.Input(part))
		}
		if err := CheckDatasetName(name); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMix, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: dataset %s is named twice", ErrMix, quote.Input(name))
		}
		seen[name] = true
		m = append(m, MixComponent{Dataset: name, Weight: w})
	}
	if _, err := m.IntWeights(); err != nil {
		return nil, err
	}
	return m, nil
}

// String writes the mixture as ParseMix reads it.
func (m Mix) String() string {
	parts := make([]string, len(m))
	for i, c := range m {
		parts[i] = c.Dataset + ":" + c.Weight
	}
	return strings.Join(parts, ",")
}

// IntWeights returns the weights as integers in the same ratios, divided
// by their greatest common divisor: 0.7,0.2,0.1 gives 7,2,1; 1,1 gives
// 1,1. Their sum is at most 2^31.
func (m Mix) IntWeights() ([]uint64, error) {
	if out, ok := m.intWeightsSmall(); ok {
		return out, nil
	}
	return m.intWeightsBig()
}

// intWeightsSmall is IntWeights in 64-bit integers, for weights of at
// most 18 digits once scaled to whole numbers — every mixture in
// practice, parsed on every request. ok is false for any other, and for
// any weight IntWeights refuses: intWeightsBig then answers, with the
// error.
func (m Mix) intWeightsSmall() (out []uint64, ok bool) {
	dec := 0
	for _, c := range m {
		if !plainDecimal(c.Weight) {
			return nil, false
		}
		if _, frac, ok := strings.Cut(c.Weight, "."); ok {
			dec = max(dec, len(frac))
		}
	}
	if dec > MaxMixWeightDecimals {
		return nil, false
	}
	out = make([]uint64, len(m))
	var g uint64
	for i, c := range m {
		whole, frac, _ := strings.Cut(c.Weight, ".")
		whole = strings.TrimLeft(whole, "0")
		if len(whole)+dec > 18 {
			return nil, false
		}
		var v uint64
		for j := range len(whole) {
			v = 10*v + uint64(whole[j]-'0')
		}
		for j := range dec {
			v *= 10
			if j < len(frac) {
				v += uint64(frac[j] - '0')
			}
		}
		if v == 0 {
			return nil, false
		}
		out[i] = v
		for a, b := g, v; ; {
			if b == 0 {
				g = a
				break
			}
			a, b = b, a%b
		}
	}
	var sum uint64
	for i := range out {
		out[i] /= g
		sum += out[i]
		if sum > shuffle.MaxMixWeightSum {
			return nil, false
		}
	}
	return out, true
}

// intWeightsBig is IntWeights in arbitrary precision.
func (m Mix) intWeightsBig() ([]uint64, error) {
	rats := make([]*big.Rat, len(m))
	dec := 0
	for i, c := range m {
		w := c.Weight
		if !plainDecimal(w) {
			return nil, fmt.Errorf("%w: weight %s of %s: write a plain positive decimal, such as 0.7", ErrMix, quote.Input(w), quote.Input(c.Dataset))
		}
		if _, frac, ok := strings.Cut(w, "."); ok {
			if len(frac) > MaxMixWeightDecimals {
				return nil, fmt.Errorf("%w: weight %s of %s has more than %d decimals", ErrMix, quote.Input(w), quote.Input(c.Dataset), MaxMixWeightDecimals)
			}
			dec = max(dec, len(frac))
		}
		r, ok := new(big.Rat).SetString(w)
		if !ok || r.Sign() <= 0 {
			return nil, fmt.Errorf("%w: weight %s of %s must be a positive decimal", ErrMix, quote.Input(w), quote.Input(c.Dataset))
		}
		rats[i] = r
	}
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(dec)), nil))
	ints := make([]*big.Int, len(m))
	g := new(big.Int)
	for i, r := range rats {
		ints[i] = new(big.Rat).Mul(r, scale).Num() // an integer: r has at most dec decimals
		g.GCD(nil, nil, g, ints[i])
	}
	sum := new(big.Int)
	out := make([]uint64, len(m))
	for i, n := range ints {
		n.Quo(n, g)
		sum.Add(sum, n)
		if sum.Cmp(big.NewInt(shuffle.MaxMixWeightSum)) > 0 {
			return nil, fmt.Errorf("%w: weights %s are too finely divided (as integers they sum past 2^31); round them", ErrMix, m)
		}
		out[i] = n.Uint64()
	}
	return out, nil
}

// plainDecimal reports whether w is digits with at most one decimal
// point between or after them: 7, 0.7, 7., not .7, 1e3, 0x10 or 1_0.
func plainDecimal(w string) bool {
	point, digits := false, 0
	for i := range len(w) {
		switch c := w[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !point && digits > 0:
			point = true
		default:
			return false
		}
	}
	return digits > 0
}
