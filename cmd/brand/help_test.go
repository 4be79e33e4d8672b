package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/cli"
)

// helpOf runs `brand help [command]` and returns its output.
func helpOf(t *testing.T, command ...string) string {
	t.Helper()
	var out syncBuffer
	args := append([]string{"help"}, command...)
	if code := run(t.Context(), &cli.Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}, args); code != 0 {
		t.Fatalf("brand %s exited %d:\n%s", strings.Join(args, " "), code, out.String())
	}
	return out.String()
}

var (
	// A flag's line in a FlagSet's defaults: "  -name type".
	definedFlag = regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)`)
	// A flag named in prose: --name, or --name-* for a family.
	mentionedFlag = regexp.MustCompile(`(?:^|[^\w-])--([a-z0-9][a-z0-9-]*\*?)`)
)

// TestHelpNamesOnlyFlagsThatExist: every flag `brand help` and `brand
// help CMD` name is one the command defines, spelled out (a family such
// as --s3-* cannot be checked), and `brand index`'s summary names every
// format it indexes. The reproduction: `brand help` said S3 credentials
// came from "the --s3-* flags", of which none sets a credential, and
// described index as tar-only; `brand help version` printed the version.
func TestHelpNamesOnlyFlagsThatExist(t *testing.T) {
	defined := map[string][]string{} // command -> its flags
	all := map[string]bool{}
	for _, c := range program().Commands {
		h := helpOf(t, c.Name)
		if !strings.Contains(h, "Usage: brand "+c.Name) {
			t.Errorf("brand help %s shows no usage:\n%s", c.Name, h)
		}
		for _, m := range definedFlag.FindAllStringSubmatch(h, -1) {
			defined[c.Name] = append(defined[c.Name], m[1])
			all[m[1]] = true
		}
		for _, m := range mentionedFlag.FindAllStringSubmatch(h, -1) {
			if !slices.Contains(defined[c.Name], m[1]) {
				t.Errorf("brand help %s names --%s, which brand %s does not have", c.Name, m[1], c.Name)
			}
		}
	}
	usage := helpOf(t)
	for _, c := range program().Commands {
		line := regexp.MustCompile(`(?m)^  ` + c.Name + ` +(.*)$`).FindStringSubmatch(usage)
		if line == nil {
			t.Errorf("brand help does not list %s:\n%s", c.Name, usage)
			continue
		}
		for _, m := range mentionedFlag.FindAllStringSubmatch(line[1], -1) {
			if !slices.Contains(defined[c.Name], m[1]) {
				t.Errorf("brand help's line of %s names --%s, which brand %s does not have", c.Name, m[1], c.Name)
			}
		}
		usage = strings.Replace(usage, line[0], "", 1)
	}
	for _, m := range mentionedFlag.FindAllStringSubmatch(usage, -1) {
		if !all[m[1]] {
			t.Errorf("brand help names --%s, which no command has", m[1])
		}
	}
	index := helpOf(t)
	for _, f := range append([]string{"tar"}, formatNamesOf()...) {
		if !regexp.MustCompile(`(?m)^  index .*\b` + f + `\b`).MatchString(index) {
			t.Errorf("brand help's line of index does not name %s, a format it indexes", f)
		}
	}
}

// formatNamesOf is the names of the formats served in place.
func formatNamesOf() []string {
	var names []string
	for _, f := range formats() {
		names = append(names, f.Name())
	}
	return names
}
