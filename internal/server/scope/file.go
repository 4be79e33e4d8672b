package scope

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Token is a bearer token and what it may do.
type Token struct {
	Secret string
	Grant  Grant
}

// bom is UTF-8's byte-order mark.
const bom = "\uFEFF"

// The fields a credential's line may give after its secret.
const (
	KeyRights   = "rights"
	KeyDatasets = "datasets"
	KeyJobs     = "jobs"
	KeyName     = "name"
)

// ParseTokens reads a token file (`brand serve --auth-token-file`): one
// token a line, blank lines and lines starting with # ignored, each token
// optionally followed by its scope as KEY=VALUE fields:
//
//	ops-4c1d                                           # a bare token: admin, as every token was before scopes
//	trainer-7f3a rights=read datasets=web-*,code       # reads web-* and code, any job
//	owner-91c2 rights=read,edit,feedback jobs=teamA-* name=teamA
//
// rights= (read, edit, feedback, admin; comma-separated) is required once
// a line has fields; datasets= and jobs= are names or prefixes ending in
// * (comma-separated; default *, every one), and admin takes neither;
// name= is what refusals and logs call the token (default "line N"). A
// # after a space starts a comment to the end of the line (a secret's #
// is its own). A token given twice must be given the same fields twice. Errors name the
// line, never a secret.
//
// A byte-order mark at the start (an editor's on Windows) is not a part
// of the first token: kept, it made that token one no client sends. A
// UTF-16 file is refused, saying so, rather than read as tokens no client
// sends.
func ParseTokens(r io.Reader) ([]Token, error) {
	var out []Token
	seen := map[string]int{} // secret → its token's index in out
	lines := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if n == 1 {
			if strings.HasPrefix(text, "\xff\xfe") || strings.HasPrefix(text, "\xfe\xff") {
				return nil, errors.New("is UTF-16 (it starts with UTF-16's byte-order mark): save it as UTF-8")
			}
			text = strings.TrimPrefix(text, bom)
		}
		line := strings.TrimSpace(text)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if i := slices.IndexFunc(f, func(s string) bool { return strings.HasPrefix(s, "#") }); i > 0 {
			f = f[:i] // a comment after the fields
		}
		line = strings.Join(f, " ")
		secret := f[0]
		if i, ok := seen[secret]; ok {
			if lines[secret] != line {
				return nil, fmt.Errorf("line %d: the token of %s again, with another scope: give each token one line", n, out[i].Grant.Name)
			}
			continue
		}
		g := All("line " + strconv.Itoa(n))
		if len(f) > 1 {
			var err error
			if g, err = Options(f[1:], KeyRights, KeyDatasets, KeyJobs, KeyName); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			switch {
			case g.Rights == 0:
				return nil, fmt.Errorf("line %d: a token with fields names its rights: rights=read, edit, feedback or admin (comma-separated)", n)
			case g.Rights&Admin != 0 && (g.Datasets != nil || g.Jobs != nil):
				return nil, fmt.Errorf("line %d: admin is every right over every dataset and job: give it no datasets= or jobs=", n)
			}
			if g.Name == "" {
				g.Name = "line " + strconv.Itoa(n)
			}
		}
		seen[secret], lines[secret] = len(out), line
		out = append(out, Token{Secret: secret, Grant: g})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("holds no token")
	}
	return out, nil
}

// Options reads a credential's KEY=VALUE fields into a grant; keys are the
// fields the caller's file takes (KeyRights, KeyDatasets, KeyJobs,
// KeyName). A field not among them, given twice or empty is an error;
// one left out is the zero value: no rights, every dataset, every job, no
// name.
func Options(fields []string, keys ...string) (Grant, error) {
	var g Grant
	given := map[string]bool{}
	for i, field := range fields {
		k, v, ok := strings.Cut(field, "=")
		switch {
		case !ok:
			// Not quoted: it may be the rest of a secret with a space.
			return Grant{}, fmt.Errorf("field %d after the secret is not KEY=VALUE (%s); a secret has no spaces", i+1, strings.Join(keys, "=, ")+"=")
		case !slices.Contains(keys, k) && looksLikeKey(k):
			return Grant{}, fmt.Errorf("unknown field %q (known here: %s)", k, strings.Join(keys, ", "))
		case !slices.Contains(keys, k):
			return Grant{}, fmt.Errorf("field %d after the secret: unknown (known here: %s)", i+1, strings.Join(keys, ", "))
		case given[k]:
			return Grant{}, fmt.Errorf("%s= given twice", k)
		case v == "":
			return Grant{}, fmt.Errorf("%s= is empty", k)
		}
		given[k] = true
		var err error
		switch k {
		case KeyRights:
			g.Rights, err = parseRights(v)
		case KeyDatasets:
			g.Datasets, err = parsePatterns(v)
		case KeyJobs:
			g.Jobs, err = parsePatterns(v)
		case KeyName:
			if len(v) > 64 || !printable(v) {
				err = errors.New("name= is 1 to 64 printable characters")
			}
			g.Name = v
		}
		if err != nil {
			return Grant{}, fmt.Errorf("%s=: %w", k, err)
		}
	}
	return g, nil
}

func parseRights(v string) (Rights, error) {
	var rs Rights
	for part := range strings.SplitSeq(v, ",") {
		r, ok := rightNamed(part)
		if !ok {
			return 0, fmt.Errorf("unknown right %q (read, edit, feedback, admin)", part)
		}
		rs |= r
	}
	return rs, nil
}

// parsePatterns reads comma-separated patterns; nil if one is *.
func parsePatterns(v string) ([]Pattern, error) {
	var out []Pattern
	all := false
	for part := range strings.SplitSeq(v, ",") {
		switch i := strings.IndexByte(part, '*'); {
		case part == "":
			return nil, fmt.Errorf("an empty name in %q", v)
		case !printable(part):
			return nil, fmt.Errorf("%q is not printable characters without spaces", part)
		case i >= 0 && i != len(part)-1:
			return nil, fmt.Errorf("%q: * ends a prefix, and only there", part)
		case part == "*":
			all = true
		}
		out = append(out, Pattern(part))
	}
	if all {
		return nil, nil
	}
	return out, nil
}

// looksLikeKey reports whether a field's key may be named in an error: a
// short lowercase word is a misspelt key, anything else may be a piece of
// a secret.
func looksLikeKey(k string) bool {
	return len(k) <= 16 && k != "" && strings.Trim(k, "abcdefghijklmnopqrstuvwxyz_") == ""
}

func printable(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return s != ""
}
