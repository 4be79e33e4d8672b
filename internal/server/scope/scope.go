// Package scope is what a credential may do: its rights — read, edit,
// feedback, admin — over which datasets and job names, the lines of a
// credentials file that give them (ParseTokens, ParseOptions), that
// file read again as it changes without ever widening a right by a read
// caught mid-write (TokenFile), and the one check every face asks
// (Grant.Allow).
//
// A refusal is a *Denied, of kind errkind.Forbidden (403): it names the
// credential by its name= (or its line in the file), the right it lacks
// and its scope, never its secret.
//
// A grant is a value: no package-level state, safe for concurrent use.
package scope

import (
	"fmt"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/quote"
)

// Rights are what a credential may do, a set of these bits.
type Rights uint8

// The rights. Each endpoint asks for one (the gateway's table of
// endpoints); none implies another but Admin, which is all of them.
const (
	// Read: batches, epochs, manifests, samples, /plan, /stats, /cluster
	// (the figures of the jobs and datasets the scope covers),
	// /datasets, and a job's edits, schedule and sealed versions read
	// back.
	Read Rights = 1 << iota
	// Edit: a job's exclusions, appends and schedules.
	Edit
	// Feedback: a job's importance feedback and seals.
	Feedback
	// Admin: every right over every dataset and job, and the operators'
	// endpoints (/metrics, /debug/pprof/, /datasets with store URLs).
	Admin
)

var rightNames = []struct {
	r    Rights
	name string
}{{Read, "read"}, {Edit, "edit"}, {Feedback, "feedback"}, {Admin, "admin"}}

func rightNamed(name string) (Rights, bool) {
	for _, n := range rightNames {
		if n.name == name {
			return n.r, true
		}
	}
	return 0, false
}

// Has reports whether rs holds every right of need (Admin holds all).
func (rs Rights) Has(need Rights) bool { return rs&Admin != 0 || rs&need == need }

// String names the rights as rights= writes them: "read,edit".
func (rs Rights) String() string {
	var out []string
	for _, n := range rightNames {
		if rs&n.r != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

// Pattern is a name, or a prefix ending in "*" ("teamA-*"); "*" alone is
// every name.
type Pattern string

// Match reports whether name is p, or starts with p's prefix.
func (p Pattern) Match(name string) bool {
	if prefix, ok := strings.CutSuffix(string(p), "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return string(p) == name
}

// Grant is one credential's rights and scope.
type Grant struct {
	// Name is what refusals and logs call the credential: its name=, or
	// "line N" of its file. Never its secret.
	Name   string
	Rights Rights
	// Datasets and Jobs are the names the rights cover; nil: every one.
	// A request that names no job is covered by any Jobs: it reads no
	// job's state (no edits, schedule or feedback), only datasets.
	Datasets, Jobs []Pattern
}

// All is a grant of every right over everything: a token of a file of
// bare tokens, as every token was before scopes.
func All(name string) Grant { return Grant{Name: name, Rights: Admin} }

// Narrowed reports whether g covers fewer than every dataset or job:
// whoever finds a request's names by a read of its own (a job's stored
// schedule) needs to only then.
func (g Grant) Narrowed() bool {
	return g.Rights&Admin == 0 && (g.Datasets != nil || g.Jobs != nil)
}

// Dataset reports whether g's scope covers dataset name (whatever its
// rights).
func (g Grant) Dataset(name string) bool { return g.Rights&Admin != 0 || covers(g.Datasets, name) }

func covers(ps []Pattern, name string) bool {
	if ps == nil {
		return true
	}
	for _, p := range ps {
		if p.Match(name) {
			return true
		}
	}
	return false
}

// Allow is nil if g holds need over every dataset of datasets and over
// job ("" for a request that names none), else a *Denied naming the
// first thing it does not cover.
func (g Grant) Allow(need Rights, datasets []string, job string) error {
	switch {
	case g.Rights&Admin != 0:
		return nil
	case !g.Rights.Has(need):
		return &Denied{Grant: g, Need: need}
	case job != "" && !covers(g.Jobs, job):
		return &Denied{Grant: g, Need: need, Job: job}
	}
	for _, ds := range datasets {
		if !covers(g.Datasets, ds) {
			return &Denied{Grant: g, Need: need, Dataset: ds}
		}
	}
	return nil
}

// Denied is a request its credential does not cover: the right it
// needs, and the dataset or job outside the credential's scope, if that
// is what is missing.
type Denied struct {
	Grant        Grant
	Need         Rights
	Dataset, Job string
}

func (d *Denied) Error() string {
	what := "the " + d.Need.String() + " right"
	switch {
	case d.Job != "":
		what += " over job " + quote.Input(d.Job)
	case d.Dataset != "":
		what += " over dataset " + quote.Input(d.Dataset)
	}
	return fmt.Sprintf("forbidden: the credential %s lacks %s; it has %s", d.Grant.Name, what, d.Grant.Scope())
}

// Kind is errkind.Forbidden: 403.
func (d *Denied) Kind() errkind.Kind { return errkind.Forbidden }

// Scope says what g covers, as its file gives it: "read,edit over
// datasets web-* and jobs teamA-*" ("and jobs" left out for every job).
func (g Grant) Scope() string {
	if g.Rights&Admin != 0 {
		return "admin over everything"
	}
	names := func(ps []Pattern) string {
		if ps == nil {
			return "*"
		}
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = string(p)
		}
		return strings.Join(s, ",")
	}
	out := fmt.Sprintf("%s over datasets %s", g.Rights, names(g.Datasets))
	if g.Jobs != nil {
		out += " and jobs " + names(g.Jobs)
	}
	return out
}
