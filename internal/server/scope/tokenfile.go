package scope

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
)

// Why a re-read of a token file is kept out of force. Unexported: only
// the log is told (the tests reach them through export_test.go).
var (
	errUnsettled = errkind.New(errkind.Invalid, "its last line has no newline, so it may be a line still being written: "+
		"it is taken if the next read finds the file unchanged (end the file with a newline to have it taken at once)")
	errRescoped = errkind.New(errkind.Invalid, "its last line has no newline and changes the scope of a token in force: "+
		"it may be a line cut short, a scoped token's secret without all its fields; end the file with a newline to change a scope")
)

// TokenFile is a token file (ParseTokens, `brand serve --auth-token-file`)
// read at start and again whenever its bytes change (Reload): a token
// removed from the file is refused without a restart, and a re-read
// never widens a right it should not.
//
// # What a re-read takes
//
// A re-read is taken whole or not at all: one whose every line does not
// parse, or that holds no token, leaves the set in force as it was. And:
//
//   - A change is a change of the bytes (a hash of them), never of the
//     modification time and size alone, which two generations of a file
//     can share: Kubernetes' secret volumes and Nix swap a symlink
//     between files of the same length written in the same second. The
//     path is opened anew at each read, so a symlink is followed to the
//     file it names now, and the mode is the target's.
//   - A file read while it is written in place ends in a line without
//     its newline, and a scoped line cut short is wider than the whole
//     one: its secret alone is an admin token, and a line without its
//     datasets= or jobs= covers every dataset or job. So a last line
//     without its newline that holds a token is held back, and taken
//     only when the next re-read finds the same bytes: a writer caught
//     midway has moved on by then. (Kubernetes' secrets, often written
//     without a final newline, are taken a poll late.)
//   - Even then, such a line never changes the scope of a token in
//     force: a writer stalled midway would leave it wider. A file that
//     ends with a newline changes scopes at once.
//
// The first read (ReadTokenFile) takes the file as it is: there is no
// set in force to keep, and a refusal would stop the start.
//
// A TokenFile is not safe for concurrent use: one watcher reads it.
type TokenFile struct {
	path     string
	tokens   []Token           // the set in force
	sum      [sha256.Size]byte // of the bytes last read, taken or not
	held     bool              // those bytes were held back (errUnsettled)
	failed   string            // the last read's error, told once
	warnings []string
}

// ReadTokenFile reads the token file at path. Its warnings (Warnings)
// are for the caller to log.
func ReadTokenFile(path string) (*TokenFile, error) {
	b, mode, err := readFile(path)
	if err != nil {
		return nil, err
	}
	tokens, err := ParseTokens(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &TokenFile{path: path, tokens: tokens, sum: sha256.Sum256(b)}
	if mode&0o004 != 0 {
		// Warned, not refused: deployments that start this way keep
		// starting.
		f.warnings = append(f.warnings, fmt.Sprintf("every user of this machine may read the token file %s (mode %v): chmod o-r it", path, mode))
	}
	return f, nil
}

// Tokens is the set in force.
func (f *TokenFile) Tokens() []Token { return f.tokens }

// Warnings are what the file did at its first read that is taken but
// unwise (a file every user of the machine may read), each naming the
// file, for the caller to log.
func (f *TokenFile) Warnings() []string { return f.warnings }

// Reload reads the file again and, when its bytes changed and they are
// taken (the rules above), calls take with the tokens they hold: the set
// in force from then on (taken), unless take returns an error. An error
// says why the set in force was kept (never a secret); each is told
// once, until the bytes change.
func (f *TokenFile) Reload(take func([]Token) error) (taken bool, err error) {
	b, _, err := readFile(f.path)
	if err != nil {
		// A file being replaced may be missing for a moment: say so once.
		if err.Error() == f.failed {
			return false, nil
		}
		f.failed = err.Error()
		return false, err
	}
	f.failed = ""
	sum := sha256.Sum256(b)
	if sum == f.sum && !f.held {
		return false, nil
	}
	settled := sum == f.sum // and held back last time
	f.sum, f.held = sum, false
	tokens, err := ParseTokens(bytes.NewReader(b))
	if err != nil {
		return false, err
	}
	if secret, ok := unterminated(b); ok {
		if !settled {
			f.held = true
			return false, errUnsettled
		}
		if name, ok := f.rescopes(tokens, secret); ok {
			return false, fmt.Errorf("the token of %s: %w", name, errRescoped)
		}
	}
	if err := take(tokens); err != nil {
		return false, err
	}
	f.tokens = tokens
	return true, nil
}

// rescopes reports whether the token of secret in tokens has another
// scope than in the set in force, and the name it has there.
func (f *TokenFile) rescopes(tokens []Token, secret string) (string, bool) {
	i := slices.IndexFunc(f.tokens, func(t Token) bool { return t.Secret == secret })
	j := slices.IndexFunc(tokens, func(t Token) bool { return t.Secret == secret })
	if i < 0 || j < 0 {
		return "", false
	}
	was, is := f.tokens[i].Grant, tokens[j].Grant
	same := was.Rights == is.Rights && slices.Equal(was.Datasets, is.Datasets) && slices.Equal(was.Jobs, is.Jobs) &&
		(was.Datasets == nil) == (is.Datasets == nil) && (was.Jobs == nil) == (is.Jobs == nil)
	return was.Name, !same
}

// unterminated is the secret of b's last line if that line has no
// newline and holds a token (a blank line or a comment holds none).
func unterminated(b []byte) (string, bool) {
	i := bytes.LastIndexByte(b, '\n')
	line := string(b[i+1:])
	if i < 0 {
		line = strings.TrimPrefix(line, bom)
	}
	f := strings.Fields(line)
	if len(f) == 0 || strings.HasPrefix(f[0], "#") {
		return "", false
	}
	return f[0], true
}

// readFile reads the file path names now (through any symlink) and the
// permission bits of what it read.
func readFile(path string) ([]byte, fs.FileMode, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, 0, err
	}
	b, err := io.ReadAll(file)
	if err != nil {
		return nil, 0, err
	}
	return b, st.Mode().Perm(), nil
}
