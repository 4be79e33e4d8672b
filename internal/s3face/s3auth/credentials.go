package s3auth

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/server/scope"
)

// Credentials are the key pairs requests may be signed with, each with
// the buckets it may read.
type Credentials struct {
	secrets map[string]string      // access key ID → secret
	grants  map[string]scope.Grant // access key ID → what it may read
}

// ErrCredentials reports a malformed credentials file.
var ErrCredentials = errkind.New(errkind.Internal, "s3auth: credentials")

// LoadCredentials reads a credentials file (ParseCredentials).
func LoadCredentials(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := ParseCredentials(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseCredentials reads key pairs, one `ACCESS_KEY_ID SECRET_ACCESS_KEY`
// per line, each optionally followed by the buckets it may read as a
// token's scope gives them (scope.Options): datasets=web-*,code (names or
// prefixes ending in *, the datasets' buckets and read-through ones
// alike; default every bucket) and name= (what refusals call the key;
// default "key ACCESS_KEY_ID"). The face is read-only: a key reads,
// whatever else it is given, so it takes no rights= or jobs=. Blank lines
// and lines starting with # are ignored. Errors name the line, never a
// secret.
func ParseCredentials(r io.Reader) (*Credentials, error) {
	c := &Credentials{secrets: map[string]string{}, grants: map[string]scope.Grant{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) < 2:
			return nil, fmt.Errorf("%w: line %d: want `ACCESS_KEY_ID SECRET_ACCESS_KEY [datasets=PREFIX*,…] [name=NAME]`, found %d field", ErrCredentials, n, len(f))
		case !token(f[0], 3):
			return nil, fmt.Errorf("%w: line %d: an access key ID is 3 to 128 printable characters", ErrCredentials, n)
		case !token(f[1], 8):
			return nil, fmt.Errorf("%w: line %d: the secret of %s is not 8 to 128 printable characters", ErrCredentials, n, f[0])
		case c.secrets[f[0]] != "":
			return nil, fmt.Errorf("%w: line %d: access key ID %s given twice", ErrCredentials, n, f[0])
		}
		g, err := scope.Options(f[2:], scope.KeyDatasets, scope.KeyName)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrCredentials, n, err)
		}
		g.Rights = scope.Read
		if g.Name == "" {
			g.Name = "key " + f[0]
		}
		c.secrets[f[0]], c.grants[f[0]] = f[1], g
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(c.secrets) == 0 {
		return nil, fmt.Errorf("%w: no key pairs", ErrCredentials)
	}
	return c, nil
}

func token(s string, minLen int) bool {
	if len(s) < minLen || len(s) > 128 {
		return false
	}
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Secret is the secret of access key ID id.
func (c *Credentials) Secret(id string) (string, bool) {
	s, ok := c.secrets[id]
	return s, ok
}

// Grant is what access key ID id may read (read over its buckets).
func (c *Credentials) Grant(id string) scope.Grant { return c.grants[id] }

// Len is the number of key pairs.
func (c *Credentials) Len() int { return len(c.secrets) }

// String names the key IDs, never the secrets.
func (c *Credentials) String() string { return fmt.Sprintf("%d S3 key pairs", len(c.secrets)) }
