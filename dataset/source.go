package dataset

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/codec/ustar"
)

// sourceFile is one file of the tree being packed.
type sourceFile struct {
	name string // member name: the path relative to the source, with '/'
	path string // where to open it
	size int64  // when listed; a different size at read time fails the pack
}

// sourceSample is the files sharing a WebDataset key, in member-name order.
type sourceSample struct {
	key     string
	files   []sourceFile
	tarSize int64 // bytes the sample occupies in a chunk, headers included
}

// source is a directory tree grouped into samples, sorted by key.
type source struct {
	samples []sourceSample
	files   int
	skipped int // hidden entries left out
}

// scanSource lists the tree under dir and groups its files into samples by
// chunkindex.SplitKey of their slash-separated relative paths.
//
// What is packed, and why:
//   - regular files, and symbolic links to regular files (as the file they
//     point to: trees of links into a shared pool are a common way to define
//     a split);
//   - not entries whose name starts with '.' (files, and directories with
//     everything under them): such a file has no key stem, chunkindex cannot
//     write it and WebDataset readers drop it; the directories are the likes
//     of .git and .ipynb_checkpoints. They are counted in source.skipped;
//   - anything else is an error naming the path: a dangling link, a link to
//     a directory (not followed, so the tree cannot loop), a device, FIFO or
//     socket, or an entry that cannot be read.
func scanSource(ctx context.Context, dir string) (*source, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("dataset: source: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("dataset: source %s is not a directory", dir)
	}
	src := &source{}
	byKey := map[string]int{} // key -> index in src.samples
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("dataset: reading %s: %w", path, err)
		}
		if path == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			src.skipped++
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return ctx.Err() // a cheap place to notice cancellation
		}
		size, err := regularSize(path, d)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return fmt.Errorf("dataset: %s: %w", path, err)
		}
		f := sourceFile{name: filepath.ToSlash(rel), path: path, size: size}
		key, _ := chunkindex.SplitKey(f.name)
		i, ok := byKey[key]
		if !ok {
			i = len(src.samples)
			byKey[key] = i
			src.samples = append(src.samples, sourceSample{key: key})
		}
		s := &src.samples[i]
		s.files = append(s.files, f)
		s.tarSize += memberSize(f.name, f.size)
		src.files++
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(src.samples, func(a, b sourceSample) int { return strings.Compare(a.key, b.key) })
	for i := range src.samples {
		s := &src.samples[i]
		slices.SortFunc(s.files, func(a, b sourceFile) int { return strings.Compare(a.name, b.name) })
		if s.tarSize > chunkindex.MaxSampleLength {
			return nil, fmt.Errorf("dataset: sample %q is %d bytes, more than the index format's limit of %d", s.key, s.tarSize, int64(chunkindex.MaxSampleLength))
		}
	}
	return src, nil
}

// regularSize returns the size of the regular file at path, following a
// symbolic link, or an error naming path if it is anything else.
func regularSize(path string, d fs.DirEntry) (int64, error) {
	var (
		fi  fs.FileInfo
		err error
	)
	if d.Type()&fs.ModeSymlink != 0 {
		fi, err = os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("dataset: %s is a dangling symbolic link: %w", path, err)
		}
	} else {
		fi, err = d.Info()
	}
	if err != nil {
		return 0, fmt.Errorf("dataset: %s: %w", path, err)
	}
	switch {
	case fi.Mode().IsRegular():
		return fi.Size(), nil
	case fi.IsDir():
		return 0, fmt.Errorf("dataset: %s is a symbolic link to a directory, which pack does not follow; link the files or pack the directory itself", path)
	default:
		return 0, fmt.Errorf("dataset: %s is not a regular file (%s)", path, fi.Mode().Type())
	}
}

// memberSize returns the bytes a file occupies in a chunk written by
// chunkindex.ChunkWriter: its header blocks plus its data padded to a block.
func memberSize(name string, size int64) int64 {
	return headerSize(name, size) + roundBlock(size)
}

// headerSize returns the size of the header blocks ChunkWriter writes for
// a member. Almost every name fits a plain ustar header; the rare one that
// needs a pax header (long or non-ASCII names, sizes of 8 GiB and more) is
// measured by encoding the same header ChunkWriter writes
// (ustar.AppendHeader, archive/tar's choice of format), so the plan agrees
// with the chunk byte for byte.
func headerSize(name string, size int64) int64 {
	if len(name) <= 100 && size < 1<<33 && isASCII(name) {
		return chunkindex.BlockSize
	}
	b, err := ustar.AppendHeader(nil, ustar.Header{Name: name, Size: size, Mode: 0o644, ModTime: time.Unix(0, 0), Format: ustar.Any})
	if err != nil {
		// ChunkWriter will fail on the same header with a better message;
		// the estimate only places chunk boundaries.
		return chunkindex.BlockSize
	}
	return int64(len(b))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || s[i] == 0 {
			return false
		}
	}
	return true
}

func roundBlock(n int64) int64 {
	return (n + chunkindex.BlockSize - 1) &^ (chunkindex.BlockSize - 1)
}
