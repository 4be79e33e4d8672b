// Package s3test gives tests an s3backend.Store in memory and a wrapper
// of any Store that counts, fails and holds its calls: the fakes a test
// of a package reading through a Store needs, written once, rather than
// a copy in each package drifting from the others and from the Store's
// contract.
//
// Memory keeps s3backend.Local's semantics (TestConformance holds the
// two to one table), so a test over it says what it would over a
// directory, without one. Store's hooks are the three things the
// module's tests ask of a store beyond its data:
//
//   - counts: the reads of each key, their bytes, the most of one key in
//     flight at once, the writes (Total since the wrap; Take since the
//     last take, so that a test counts a phase of its own);
//   - failures: an error put in place of the calls a function picks
//     (Fail), as a store that is down or refuses a write would answer;
//   - gates: the calls a function picks held until the test opens the
//     gate (Gate), each held call signalled, so that a test orders a
//     read against the rest of the system; a held call ends with its
//     context.
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package s3test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/s3backend"
)

// Memory is an s3backend.Store of objects in memory. An object's ETag
// names its bytes (their MD5, as S3's for an object put whole), so the
// same bytes put again keep their ETag and other bytes change it, as on
// S3 and s3backend.Local. It is safe for concurrent use.
type Memory struct {
	mu   sync.Mutex
	objs map[string]object
}

type object struct {
	data []byte
	etag string
	mod  time.Time
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{objs: map[string]object{}} }

// String names the store in errors and logs.
func (m *Memory) String() string { return "mem://" }

// ReadRange fills p with bytes [off, off+len(p)) of the object: a read
// pinned to another ETag than the object's fails with ErrChanged, one
// past its end with ErrOutOfRange.
func (m *Memory) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	if err := ready(ctx, key, false); err != nil {
		return err
	}
	if off < 0 {
		return fmt.Errorf("s3test: read %s: negative offset %d", key, off)
	}
	o, err := m.get(key)
	if err != nil {
		return err
	}
	if etag != "" && etag != o.etag {
		return fmt.Errorf("%w: %s is %s, the read pinned to %s", s3backend.ErrChanged, key, o.etag, etag)
	}
	if off+int64(len(p)) > int64(len(o.data)) {
		return fmt.Errorf("%w: %s: bytes [%d, %d) of %d", s3backend.ErrOutOfRange, key, off, off+int64(len(p)), len(o.data))
	}
	copy(p, o.data[off:])
	return nil
}

// Stat returns the object's size, ETag and time of writing.
func (m *Memory) Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error) {
	if err := ready(ctx, key, false); err != nil {
		return s3backend.ObjectInfo{}, err
	}
	o, err := m.get(key)
	if err != nil {
		return s3backend.ObjectInfo{}, err
	}
	return o.info(key), nil
}

// Put stores size bytes of r (r to its end when size is -1) under key,
// replacing any object there.
func (m *Memory) Put(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error) {
	return m.put(ctx, key, r, size, true)
}

// PutIfAbsent is Put that fails with ErrExists where key holds an
// object; size must be known.
func (m *Memory) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error) {
	if size < 0 {
		return s3backend.ObjectInfo{}, fmt.Errorf("s3test: put %s if absent: the size must be known, not %d", key, size)
	}
	return m.put(ctx, key, r, size, false)
}

func (m *Memory) put(ctx context.Context, key string, r io.Reader, size int64, replace bool) (s3backend.ObjectInfo, error) {
	if err := ready(ctx, key, false); err != nil {
		return s3backend.ObjectInfo{}, err
	}
	if size < -1 {
		return s3backend.ObjectInfo{}, fmt.Errorf("s3test: put %s: invalid size %d", key, size)
	}
	var buf bytes.Buffer
	var err error
	if size >= 0 {
		var n int64
		if n, err = io.CopyN(&buf, r, size); err == io.EOF {
			err = fmt.Errorf("reader ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
		}
	} else {
		_, err = io.Copy(&buf, r)
	}
	if err != nil {
		return s3backend.ObjectInfo{}, fmt.Errorf("s3test: put %s: %w", key, err)
	}
	sum := md5.Sum(buf.Bytes())
	o := object{data: buf.Bytes(), etag: hex.EncodeToString(sum[:]), mod: time.Now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok && !replace {
		return s3backend.ObjectInfo{}, fmt.Errorf("%w: %s", s3backend.ErrExists, key)
	}
	m.objs[key] = o
	info := o.info(key)
	info.ModTime = time.Time{} // as a Put reports it on every Store
	return info, nil
}

// List returns the objects whose keys start with prefix, sorted by key.
func (m *Memory) List(ctx context.Context, prefix string) ([]s3backend.ObjectInfo, error) {
	if err := ready(ctx, prefix, true); err != nil {
		return nil, err
	}
	m.mu.Lock()
	var out []s3backend.ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, o.info(k))
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b s3backend.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete removes the object; a key holding none is not an error.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := ready(ctx, key, false); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.objs, key)
	m.mu.Unlock()
	return nil
}

func (m *Memory) get(key string) (object, error) {
	m.mu.Lock()
	o, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return object{}, fmt.Errorf("%w: %s", s3backend.ErrNotFound, key)
	}
	return o, nil
}

func (o object) info(key string) s3backend.ObjectInfo {
	return s3backend.ObjectInfo{Key: key, Size: int64(len(o.data)), ETag: o.etag, ModTime: o.mod}
}

// ready refuses a call whose context has ended, or whose key (a List's
// prefix, which may be empty or end in "/") every Store refuses with
// ErrInvalidKey: one that could name no object on S3 and a directory's
// parent on Local.
func ready(ctx context.Context, key string, prefix bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3test: %s: %w", key, err)
	}
	p := key
	if prefix {
		if p = strings.TrimSuffix(key, "/"); p == "" && key == "" {
			return nil
		}
	}
	bad := p == "" || strings.ContainsRune(p, 0)
	for seg := range strings.SplitSeq(p, "/") {
		bad = bad || seg == "" || seg == "." || seg == ".."
	}
	if bad {
		return fmt.Errorf("%w: %q", s3backend.ErrInvalidKey, key)
	}
	return nil
}
