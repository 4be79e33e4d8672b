package scope_test

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/internal/server/scope"
)

func TestParseTokens(t *testing.T) {
	admin := func(line string) scope.Grant { return scope.All("line " + line) }
	tests := []struct {
		name, file string
		want       []scope.Token
		err        string // a part of the error; "" for none
	}{
		{"a file of bare tokens, as before scopes", "# rotated monthly\nold-token\n\n  new-token  \n",
			[]scope.Token{{"old-token", admin("2")}, {"new-token", admin("4")}}, ""},
		{"a secret with = is a bare token", "YWJj==\n", []scope.Token{{"YWJj==", admin("1")}}, ""},
		{"the same bare token twice", "t\nt\n", []scope.Token{{"t", admin("1")}}, ""},
		{"read over prefixes", "r rights=read datasets=web-*,code jobs=teamA-*\n", []scope.Token{{"r", scope.Grant{Name: "line 1", Rights: scope.Read,
			Datasets: []scope.Pattern{"web-*", "code"}, Jobs: []scope.Pattern{"teamA-*"}}}}, ""},
		{"a name, tabs, * as every one", "o\trights=edit,read,feedback\tjobs=* name=teamA\n", []scope.Token{{"o", scope.Grant{Name: "teamA",
			Rights: scope.Read | scope.Edit | scope.Feedback}}}, ""},
		{"admin by its right", "a rights=admin\n", []scope.Token{{"a", scope.Grant{Name: "line 1", Rights: scope.Admin}}}, ""},
		{"no token", "# none\n\n", nil, "holds no token"},
		{"a space in a token", "two words\n", nil, "line 1: field 1 after the secret is not KEY=VALUE"},
		{"fields without rights", "t datasets=web\n", nil, "line 1: a token with fields names its rights"},
		{"an unknown right", "x\nt rights=read,write\n", nil, `line 2: rights=: unknown right "write"`},
		{"an unknown field", "t rights=read dataset=web\n", nil, `line 1: unknown field "dataset"`},
		{"a secret with a space and an =", "half1 Half2=x\n", nil, "line 1: field 1 after the secret: unknown"},
		{"a field twice", "t rights=read rights=edit\n", nil, "line 1: rights= given twice"},
		{"an empty field", "t rights=read jobs=\n", nil, "line 1: jobs= is empty"},
		{"an empty name in a list", "t rights=read jobs=a,,b\n", nil, "line 1: jobs=: an empty name"},
		{"* inside a name", "t rights=read datasets=we*b\n", nil, `line 1: datasets=: "we*b": * ends a prefix`},
		{"scoped admin", "t rights=admin datasets=web\n", nil, "line 1: admin is every right"},
		{"a token twice, scoped otherwise", "t\n#\nt rights=read\n", nil, "line 3: the token of line 1 again"},
		// The reproduction: docs/http-api.md's example, comments after
		// its tokens, made brand serve exit 1 (field 1 is not KEY=VALUE).
		{"comments after the fields", "ops   # admin: everything\nr rights=read datasets=web-*  # trainers\nr rights=read datasets=web-* #again\n",
			[]scope.Token{{"ops", admin("1")}, {"r", scope.Grant{Name: "line 2", Rights: scope.Read, Datasets: []scope.Pattern{"web-*"}}}}, ""},
		{"a # in a secret is the secret's", "a#b\n", []scope.Token{{"a#b", admin("1")}}, ""},
		// The reproduction (issue 98, item 7): a byte-order mark made the
		// first token one no client sends, or a comment a token.
		{"a byte-order mark", "\uFEFFops\nr rights=read\n", []scope.Token{{"ops", admin("1")}, {"r", scope.Grant{Name: "line 2", Rights: scope.Read}}}, ""},
		{"a byte-order mark before a comment", "\uFEFF# rotated monthly\nops\n", []scope.Token{{"ops", admin("2")}}, ""},
		{"UTF-16", "\xff\xfeo\x00p\x00s\x00\n\x00", nil, "is UTF-16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := scope.ParseTokens(strings.NewReader(tt.file))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				for _, f := range strings.Fields(tt.file) {
					if len(f) > 3 && !strings.Contains(f, "=") && strings.Contains(err.Error(), f) {
						t.Errorf("the error %q shows the secret %q", err, f)
					}
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestAllow(t *testing.T) {
	reader := scope.Grant{Name: "trainers", Rights: scope.Read, Datasets: []scope.Pattern{"web-*"}, Jobs: []scope.Pattern{"teamA-*"}}
	owner := scope.Grant{Name: "line 2", Rights: scope.Read | scope.Edit, Jobs: []scope.Pattern{"teamA-*", "shared"}}
	tests := []struct {
		name     string
		g        scope.Grant
		need     scope.Rights
		datasets []string
		job      string
		denied   string // a part of the refusal; "" when allowed
	}{
		{"read in scope", reader, scope.Read, []string{"web-en", "web-"}, "teamA-1", ""},
		{"read of no job", reader, scope.Read, []string{"web-en"}, "", ""},
		{"read of nothing named", reader, scope.Read, nil, "", ""},
		{"edit by a reader", reader, scope.Edit, nil, "teamA-1", `the credential trainers lacks the edit right; it has read over datasets web-* and jobs teamA-*`},
		{"feedback by an owner", owner, scope.Feedback, nil, "teamA-1", "lacks the feedback right"},
		{"admin by an owner", owner, scope.Admin, nil, "", "lacks the admin right"},
		{"another job", owner, scope.Edit, nil, "teamB-x", `line 2 lacks the edit right over job "teamB-x"`},
		{"an exact job", owner, scope.Edit, nil, "shared", ""},
		{"a job a prefix of the exact one", owner, scope.Edit, nil, "share", `over job "share"`},
		{"another dataset", reader, scope.Read, []string{"web-en", "books"}, "teamA-1", `over dataset "books"`},
		{"every dataset", owner, scope.Read, []string{"books"}, "", ""},
		{"admin", scope.All("line 1"), scope.Admin, []string{"x"}, "y", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.g.Allow(tt.need, tt.datasets, tt.job)
			if tt.denied == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var d *scope.Denied
			if !errors.As(err, &d) || !strings.Contains(err.Error(), tt.denied) {
				t.Fatalf("%v, want a refusal saying %q", err, tt.denied)
			}
			if s := httperr.Status(err); s != http.StatusForbidden {
				t.Errorf("status %d, want 403", s)
			}
			if r := httperr.Reason(httperr.Status(err), err); r != "forbidden" {
				t.Errorf("reason %q, want forbidden", r)
			}
		})
	}
}
