package features

import (
	"fmt"
	"strings"
)

// Published is the table as the golden file holds it, for clients that
// check a job before they send it (the Python client reads it, instead
// of a copy of the rules of its own).
type Published struct {
	Version    int         `json:"version"`
	Error      string      `json:"error"` // the refusals' prefix: ErrIncompatible's text
	Features   []Def       `json:"features"`
	Pairs      []Cell      `json:"pairs"`
	Companions []Companion `json:"companions"`
	Exclusives []Exclusive `json:"exclusives"`
	Rules      []Rule      `json:"rules"`
}

// Publish is the table as the golden file python/brand/compat.json holds
// it (written by this package's tests with -update). Version 2 added the
// rules.
func Publish() Published {
	return Published{Version: 2, Error: ErrIncompatible.Error(), Features: Features(), Pairs: Table(), Companions: Companions(),
		Exclusives: Exclusives(), Rules: Rules()}
}

// Markdown is the table as docs/http-api.md shows it: each feature, a
// matrix of every pair (· composes, ✗ refused, ↓ a downgrade; numbered
// where a note says more: a composition /plan does not model), and the
// numbered messages.
func Markdown() string {
	defs := Features()
	var sb strings.Builder
	sb.WriteString("| feature | what it is |\n| --- | --- |\n")
	for _, d := range defs {
		fmt.Fprintf(&sb, "| `%s` | %s%s |\n", d.Name, d.What, resolvedNote(d))
	}
	sb.WriteString("\n|   |")
	for i := range defs {
		fmt.Fprintf(&sb, " %d |", i+1)
	}
	sb.WriteString("\n| --- |")
	for range defs {
		sb.WriteString(" :-: |")
	}
	sb.WriteString("\n")
	notes := map[[2]Feature]int{}
	var list []Cell
	for _, c := range Table() {
		if c.Verdict != Compose || c.Plan != "" {
			list = append(list, c)
			notes[[2]Feature{c.A, c.B}] = len(list)
			notes[[2]Feature{c.B, c.A}] = len(list)
		}
	}
	for i, a := range defs {
		fmt.Fprintf(&sb, "| %d `%s` |", i+1, a.Name)
		for j, b := range defs {
			switch n, ok := notes[[2]Feature{a.Name, b.Name}]; {
			case i == j:
				sb.WriteString("   |")
			case !ok:
				sb.WriteString(" · |")
			case Lookup(a.Name, b.Name).Verdict == Refuse:
				fmt.Fprintf(&sb, " ✗%d |", n)
			case Lookup(a.Name, b.Name).Verdict == Compose:
				fmt.Fprintf(&sb, " ·%d |", n)
			default:
				fmt.Fprintf(&sb, " ↓%d |", n)
			}
		}
		sb.WriteString("\n")
	}
	sb.WriteString("\n")
	for i, c := range list {
		what, why := "refused (400)", c.Message
		switch {
		case c.Verdict == Downgrade:
			what = fmt.Sprintf("served; `%s` has no effect", c.Drops)
		case c.Verdict == Compose:
			what, why = "served; `/plan` answers 501", c.Plan
		}
		fmt.Fprintf(&sb, "%d. `%s` × `%s`: %s: %s.\n", i+1, c.A, c.B, what, why)
	}
	sb.WriteString("\nParameters that shape one feature are refused (400) without it, and parameters that name one thing two ways are refused together:\n\n")
	for _, c := range Companions() {
		params := strings.Join(c.Params, "`, `")
		if c.Value != "" {
			params += "=" + c.Value
		}
		fmt.Fprintf(&sb, "- `%s`: %s.\n", params, strings.ReplaceAll(c.Message, "{param}", "each"))
	}
	for _, e := range Exclusives() {
		fmt.Fprintf(&sb, "- `%s` together: %s.\n", strings.Join(e.Params, "`, `"), e.Message)
	}
	sb.WriteString("\nRules of three features, or of features and parameters, that no pair can say: a request that meets all of one is refused (400), after the pairs, by the first in this order:\n\n")
	for _, r := range Rules() {
		fmt.Fprintf(&sb, "- %s: %s.\n", ruleText(r), strings.ReplaceAll(r.Message, "{param}", "each"))
	}
	return sb.String()
}

// ruleText is what r refuses, in words: its features (`tokens`) and
// parameters (`eos=`).
func ruleText(r Rule) string {
	param := func(p Param) string { return "`" + p.Name + "=" + p.Value + "`" }
	params := func(ps []Param) string {
		var out []string
		for _, p := range ps {
			out = append(out, param(p))
		}
		if len(out) < 2 {
			return strings.Join(out, "")
		}
		return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
	}
	var parts []string
	if len(r.Features) > 0 {
		var fs []string
		for _, f := range r.Features {
			fs = append(fs, "`"+string(f)+"`")
		}
		parts = append(parts, strings.Join(fs, " × "))
	}
	if len(r.Given) > 0 {
		w := params(r.Given)
		if len(parts) > 0 {
			w = "with " + w
		}
		parts = append(parts, w)
	}
	if len(r.Unless) > 0 {
		parts = append(parts, "without "+params(r.Unless))
	}
	return strings.Join(parts, " ")
}

func resolvedNote(d Def) string {
	if d.Resolved {
		return " (known to the server: not a parameter)"
	}
	return ""
}
