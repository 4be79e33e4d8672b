package disktier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/errkind"
)

// Subdir is the directory the tier keeps its files in, under each of its
// directories. Everything else there is left alone.
const Subdir = "brand-chunks-v1"

// Config configures a Tier.
type Config struct {
	// Dirs are the directories to keep chunks in, one per drive; the
	// capacity is split between them equally.
	Dirs []string
	// Capacity bounds the bytes of the tier's files, headers included.
	Capacity int64
	// Distance is a chunk's next-use key, as the RAM cache's policy sees
	// it: larger is needed later. Nil: least recently used first.
	Distance func(chunkcache.Key) int64
	// Writers bounds the files being written at once per directory;
	// default 2. WriteWait bounds how long a chunk waits for a writer
	// (holding its RAM pin) before it is given up; default 1 s.
	Writers   int
	WriteWait time.Duration
	// WriteFile writes a new file at path holding header then data; nil
	// writes with the operating system. Tests use it to fail writes as a
	// full or failing disk would.
	WriteFile func(path string, header, data []byte) error
	Registry  prometheus.Registerer
	Log       zerolog.Logger
}

// Tier is a byte-bounded set of chunk files. It is safe for concurrent use.
type Tier struct {
	dirs      []*dir
	distance  func(chunkcache.Key) int64
	writeWait time.Duration
	writeFile func(path string, header, data []byte) error
	log       zerolog.Logger
	m         *metrics

	mu      sync.Mutex
	entries map[chunkcache.Key]*entry
	// later holds chunks not written because no writer was free in time:
	// Wants asks for them again while the RAM cache still holds them.
	later  map[chunkcache.Key]struct{}
	seq    uint64 // recency, for LRU and ties
	closed bool
	// reading and writing count the reads and writes in flight, which
	// Close waits for; each is added under mu, and only while open.
	reading, writing sync.WaitGroup
}

type dir struct {
	path     string // the tier's subdirectory
	capacity int64
	used     int64 // bytes of its entries, written or being written
	full     bool  // the drive said ENOSPC: capacity was lowered to used
	sem      chan struct{}
}

type entry struct {
	key   chunkcache.Key
	dir   *dir
	path  string
	size  int64 // chunk bytes
	bytes int64 // file bytes, header included: what counts
	ready bool  // written and renamed into place
	used  uint64
}

// Open prepares the directories and finds the chunk files they hold:
// temporary files left by a crash are removed, files that are not whole
// chunk files of this format are removed, and the others are kept,
// unverified, until Prune checks them against the loaded indexes (their
// bytes are verified on every read). Capacity is split equally between
// the directories; files beyond a directory's share are removed, those
// last used (by modification time) first kept.
func Open(cfg Config) (*Tier, error) {
	if len(cfg.Dirs) == 0 {
		return nil, errors.New("disktier: no directories")
	}
	if cfg.Capacity <= 0 {
		return nil, fmt.Errorf("disktier: capacity %d bytes; must be positive", cfg.Capacity)
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 2
	}
	if cfg.WriteWait <= 0 {
		cfg.WriteWait = time.Second
	}
	if cfg.WriteFile == nil {
		cfg.WriteFile = writeFile
	}
	t := &Tier{distance: cfg.Distance, writeWait: cfg.WriteWait, writeFile: cfg.WriteFile, log: cfg.Log,
		entries: map[chunkcache.Key]*entry{}, later: map[chunkcache.Key]struct{}{}}
	share := cfg.Capacity / int64(len(cfg.Dirs))
	seen := map[string]bool{}
	for _, p := range cfg.Dirs {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("disktier: %s: %w", p, err)
		}
		if seen[abs] {
			return nil, fmt.Errorf("disktier: directory %s given twice", p)
		}
		seen[abs] = true
		sub := filepath.Join(abs, Subdir)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return nil, fmt.Errorf("disktier: %w", err)
		}
		t.dirs = append(t.dirs, &dir{path: sub, capacity: share, sem: make(chan struct{}, cfg.Writers)})
	}
	t.m = newMetrics(cfg.Registry, t)
	for _, d := range t.dirs {
		if err := t.scan(d); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// scan registers d's chunk files.
func (t *Tier) scan(d *dir) error {
	des, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("disktier: %w", err)
	}
	type found struct {
		e   *entry
		mod time.Time
	}
	var files []found
	for _, de := range des {
		name := filepath.Join(d.path, de.Name())
		if isTemp(de.Name()) {
			// A write that never finished: a crash or a kill mid-write.
			os.Remove(name)
			t.m.dropped.with("incomplete").Add(1)
			continue
		}
		if !de.Type().IsRegular() || filepath.Ext(de.Name()) != suffix {
			continue // not the tier's
		}
		k, size, hdr, info, err := statFile(name)
		if err != nil || name != filepath.Join(d.path, fileName(k)) {
			os.Remove(name)
			t.m.dropped.with("malformed").Add(1)
			t.log.Warn().Str("file", name).AnErr("error", err).Msg("disk cache: removed a file that is not a whole chunk file")
			continue
		}
		if _, dup := t.entries[k]; dup { // the same chunk in two directories
			os.Remove(name)
			continue
		}
		e := &entry{key: k, dir: d, path: name, size: size, bytes: int64(hdr) + size, ready: true}
		t.entries[k] = e
		files = append(files, found{e, info.ModTime()})
	}
	// Oldest first, so the most recent files are the most recently used.
	slices.SortFunc(files, func(a, b found) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		t.seq++
		f.e.used = t.seq
		d.used += f.e.bytes
	}
	for _, f := range files {
		if d.used <= d.capacity {
			break
		}
		t.removeLocked(f.e)
		os.Remove(f.e.path)
		t.m.dropped.with("over capacity").Add(1)
	}
	t.m.found.Store(int64(len(t.entries)))
	return nil
}

// Prune checks the files found against the chunks now served: a file
// whose dataset, object, ETag and size name no chunk valid accepts is
// removed. Call it once the indexes are loaded; files written later are
// of chunks a loaded index named.
func (t *Tier) Prune(valid func(k chunkcache.Key, size int64) bool) (kept, removed int) {
	t.mu.Lock()
	var gone []*entry
	for _, e := range t.entries {
		if e.ready && !valid(e.key, e.size) {
			gone = append(gone, e)
			t.removeLocked(e)
		}
	}
	kept = len(t.entries)
	t.mu.Unlock()
	for _, e := range gone {
		os.Remove(e.path)
		t.m.dropped.with("stale").Add(1)
	}
	if len(gone) > 0 {
		t.log.Info().Int("removed", len(gone)).Int("kept", kept).Msg("disk cache: removed chunks no loaded index names (another version, or another dataset)")
	}
	return kept, len(gone)
}

// Read fills buf with chunk k from disk if the tier holds it with exactly
// len(buf) bytes and verify accepts them, and reports whether it did; a
// closed tier holds nothing. A
// file that cannot be read, is short, whose header does not name k, or
// whose bytes verify refuses (the caller checks every sample's CRC32C, as
// for bytes from the store) is removed and counted, and the caller reads
// the chunk elsewhere; a verify that returns ErrUnchecked keeps the file.
func (t *Tier) Read(ctx context.Context, k chunkcache.Key, buf []byte, verify func([]byte) error) bool {
	if ctx.Err() != nil {
		return false
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	t.reading.Add(1)
	defer t.reading.Done()
	e, ok := t.entries[k]
	if !ok || !e.ready || e.size != int64(len(buf)) {
		t.mu.Unlock()
		t.m.misses.Add(1)
		return false
	}
	t.touchLocked(e)
	t.mu.Unlock()
	start := time.Now()
	err := readFile(e.path, k, buf)
	if err == nil && verify != nil {
		err = verify(buf)
		if errors.Is(err, ErrUnchecked) {
			t.m.misses.Add(1) // the file may be right: it stays
			return false
		}
		if err != nil {
			err = fmt.Errorf("%w: %w", errDamaged, err)
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && t.restore(e.dir) {
			t.m.misses.Add(1) // its directory was removed: every chunk of it is forgotten
			return false
		}
		reason := "damaged"
		if !errors.Is(err, errHeader) && !errors.Is(err, errShort) && !errors.Is(err, errDamaged) {
			reason = "read error"
			t.m.errors.with("read").Add(1)
		}
		t.drop(e, reason, err)
		t.m.misses.Add(1)
		return false
	}
	t.m.readSeconds.Observe(time.Since(start).Seconds())
	t.m.reads.Add(1)
	t.m.readBytes.Add(int64(len(buf)))
	return true
}

var errDamaged = errors.New("chunk file failed verification")

// ErrUnchecked is what a Read's verify returns, wrapped, when it could not
// check the bytes at all (what it checks against was not to be had): the
// chunk is read elsewhere, and the file is kept.
var ErrUnchecked = errkind.New(errkind.Internal, "disktier: chunk file not checked")

// drop removes e (if it is still k's entry) and its file.
func (t *Tier) drop(e *entry, reason string, err error) {
	t.mu.Lock()
	mine := t.entries[e.key] == e
	if mine {
		t.removeLocked(e)
	}
	t.mu.Unlock()
	if !mine {
		return
	}
	os.Remove(e.path)
	t.m.dropped.with(reason).Add(1)
	t.log.Warn().Str("chunk", e.key.String()).Str("file", e.path).Str("reason", reason).AnErr("error", err).
		Msg("disk cache: chunk file removed; the chunk is read from the store")
}

// Spill offers chunk k, just loaded into the RAM cache, to the disk. The
// cache pins data until release is called, which Spill always does,
// before or after writing. It writes k if it is not on disk already and
// either fits in the room left or is needed sooner than enough of the
// chunks on disk, which it then displaces; it waits for a writer at most
// the configured WriteWait.
func (t *Tier) Spill(k chunkcache.Key, data []byte, release func()) {
	defer release()
	hdr := encodeHeader(k, int64(len(data)))
	t.mu.Lock()
	if _, ok := t.entries[k]; ok || t.closed {
		t.mu.Unlock()
		return
	}
	e := &entry{key: k, size: int64(len(data)), bytes: int64(len(hdr)) + int64(len(data))}
	victims, ok := t.placeLocked(e)
	if !ok {
		t.mu.Unlock()
		t.m.skipped.with("not needed sooner").Add(1)
		return
	}
	for _, v := range victims {
		t.removeLocked(v)
	}
	e.path = filepath.Join(e.dir.path, fileName(k))
	t.entries[k] = e
	e.dir.used += e.bytes
	t.touchLocked(e)
	t.writing.Add(1)
	t.mu.Unlock()
	defer t.writing.Done()
	for _, v := range victims {
		os.Remove(v.path)
		t.m.evictions.Add(1)
	}

	d := e.dir
	timer := time.NewTimer(t.writeWait)
	select {
	case d.sem <- struct{}{}:
		timer.Stop()
	case <-timer.C:
		t.undo(e)
		t.m.skipped.with("busy").Add(1)
		t.mu.Lock()
		if len(t.later) < maxLater {
			t.later[k] = struct{}{}
		}
		t.mu.Unlock()
		return
	}
	start := time.Now()
	err := t.writeFile(e.path, hdr, data)
	if errors.Is(err, fs.ErrNotExist) {
		// The directory may have been removed under the tier: once it
		// is back, the write is tried again, once.
		t.restore(d)
		err = t.writeFile(e.path, hdr, data)
	}
	<-d.sem
	if err != nil {
		t.undo(e)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			t.mu.Lock()
			first := !d.full
			d.full = true
			d.capacity = max(d.used, 0) // learned: what it holds is all it can
			holds := d.capacity         // read under the lock: other writers' undo changes d.used
			t.mu.Unlock()
			t.m.errors.with("full").Add(1)
			if first {
				t.log.Warn().Str("dir", d.path).Int64("holds_bytes", holds).AnErr("error", err).
					Msg("disk cache: the drive is full; its capacity is lowered to what it holds")
			}
			return
		}
		t.m.errors.with("write").Add(1)
		t.log.Warn().Str("chunk", k.String()).Str("file", e.path).AnErr("error", err).Msg("disk cache: writing a chunk failed; it is read from the store again when needed")
		return
	}
	t.m.writeSeconds.Observe(time.Since(start).Seconds())
	t.m.writes.Add(1)
	t.m.writeBytes.Add(int64(len(data)))
	t.mu.Lock()
	delete(t.later, k)
	if t.entries[k] == e {
		e.ready = true
	} else { // removed while being written (a failed read, Prune)
		os.Remove(e.path)
	}
	t.mu.Unlock()
}

// restore recreates d's directory if it is gone — removed while the
// gateway runs, by an operator clearing the disk cache or a cleaner of
// temporary files — and forgets the chunks it held, whose files went with
// it, saying so in the log; Open would have created it. Without it every
// later write to d failed, and every read of a chunk it held. It reports
// whether the directory was gone.
func (t *Tier) restore(d *dir) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := os.Stat(d.path); !errors.Is(err, fs.ErrNotExist) {
		return false // there: another read or write restored it, or the error was the file's
	}
	lost := 0
	for _, e := range t.entries {
		if e.dir == d && e.ready {
			t.removeLocked(e)
			lost++
		}
	}
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		t.log.Warn().Str("dir", d.path).Int("lost_chunks", lost).AnErr("error", err).
			Msg("disk cache: the directory was removed while serving and cannot be created again; its writes fail")
		return true
	}
	t.log.Warn().Str("dir", d.path).Int("lost_chunks", lost).
		Msg("disk cache: the directory was removed while serving; created it again (the chunks it held are read from the store when needed)")
	return true
}

// maxLater bounds the chunks remembered for a later write.
const maxLater = 1 << 16

// Wants reports whether the tier asks for chunk k now, which the RAM cache
// holds: k was not written when it was loaded because no writer was free
// in time, and a writer is free now. The cache then offers it with Spill
// (chunkcache.Spiller), so a disk slower than the store catches up while
// the chunks are in memory instead of reading them from the store again.
func (t *Tier) Wants(k chunkcache.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.later[k]; !ok || t.closed {
		return false
	}
	if _, ok := t.entries[k]; ok {
		delete(t.later, k)
		return false
	}
	for _, d := range t.dirs {
		if len(d.sem) < cap(d.sem) {
			delete(t.later, k) // Spill puts it back if it is busy again
			return true
		}
	}
	return false
}

// undo forgets an entry whose write did not happen.
func (t *Tier) undo(e *entry) {
	t.mu.Lock()
	if t.entries[e.key] == e {
		t.removeLocked(e)
	}
	t.mu.Unlock()
}

// placeLocked chooses e's directory and the chunks e displaces there: the
// directory with the most room, and, if e does not fit in it, the chunks
// needed furthest in the future, as long as each is needed later than e.
// It reports false if no directory can take e that way.
func (t *Tier) placeLocked(e *entry) (victims []*entry, ok bool) {
	var best *dir
	for _, d := range t.dirs {
		if e.bytes > d.capacity {
			continue
		}
		if best == nil || d.capacity-d.used > best.capacity-best.used {
			best = d
		}
	}
	if best == nil {
		return nil, false
	}
	e.dir = best
	free := best.capacity - best.used
	if free >= e.bytes {
		return nil, true
	}
	type cand struct {
		e    *entry
		dist int64
	}
	var cands []cand
	var own int64
	if t.distance != nil {
		own = t.distance(e.key)
	}
	for _, v := range t.entries {
		if v.dir != best || !v.ready {
			continue
		}
		c := cand{e: v}
		if t.distance != nil {
			c.dist = t.distance(v.key)
			if c.dist <= own {
				continue // needed no later than e: it stays
			}
		} else {
			c.dist = -int64(v.used) // least recently used first
		}
		cands = append(cands, c)
	}
	// Furthest first; among equals the least recently used.
	slices.SortFunc(cands, func(a, b cand) int {
		if c := cmp.Compare(b.dist, a.dist); c != 0 {
			return c
		}
		return cmp.Compare(a.e.used, b.e.used)
	})
	for _, c := range cands {
		if free >= e.bytes {
			break
		}
		victims = append(victims, c.e)
		free += c.e.bytes
	}
	return victims, free >= e.bytes
}

func (t *Tier) removeLocked(e *entry) {
	delete(t.entries, e.key)
	e.dir.used -= e.bytes
}

func (t *Tier) touchLocked(e *entry) {
	t.seq++
	e.used = t.seq
}

// Close waits for the reads and writes in flight; later Reads find
// nothing and later Spills write nothing. The files stay for the next
// Open, which may come before the closing gateway's loads have all
// returned (the chunk cache does not wait for them): a closed tier must
// not touch its directories, or a read that fails its check would remove
// a file the next Open counted, or is about to.
func (t *Tier) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.writing.Wait()
	t.reading.Wait()
}

// Stats returns the tier's figures for /stats.
func (t *Tier) Stats() api.DiskStats {
	t.mu.Lock()
	var st api.DiskStats
	for _, d := range t.dirs {
		st.Capacity += d.capacity
		st.Bytes += d.used
		if d.full {
			st.FullDirs++
		}
	}
	for _, e := range t.entries {
		if e.ready {
			st.Chunks++
		} else {
			st.Writing++
		}
	}
	t.mu.Unlock()
	m := t.m
	st.Found = m.found.Load()
	st.Reads, st.ReadBytes, st.Misses = m.reads.Load(), m.readBytes.Load(), m.misses.Load()
	st.Writes, st.WriteBytes, st.Evictions = m.writes.Load(), m.writeBytes.Load(), m.evictions.Load()
	st.Skipped, st.Dropped, st.Errors = m.skipped.sum(), m.dropped.sum(), m.errors.sum()
	return st
}

// Has reports whether k is on disk, written.
func (t *Tier) Has(k chunkcache.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[k]
	return ok && e.ready
}

// writeFile writes header and data to a temporary file beside path and
// renames it into place: a reader sees the whole file or none.
func writeFile(path string, header, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tempMark+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(header); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
