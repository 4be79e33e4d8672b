package parquet

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// How values become member bytes (package doc, "Members").

// imageExt is the extension of an image value: its path's, when that is
// an image extension, else its magic bytes', else "bin".
func imageExt(path, data []byte) string {
	if i := bytes.LastIndexByte(path, '.'); i >= 0 && len(path)-i-1 <= maxImageExt {
		var buf [maxImageExt]byte
		e := buf[:copy(buf[:], path[i+1:])]
		for j, c := range e {
			if c >= 'A' && c <= 'Z' {
				e[j] = c + 'a' - 'A'
			}
		}
		if imageExts[string(e)] {
			return string(e)
		}
	}
	return magicExt(data)
}

func magicExt(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "jpg"
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "webp"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "gif"
	case bytes.HasPrefix(b, []byte("BM")) && len(b) >= 14:
		return "bmp"
	case bytes.HasPrefix(b, []byte("II*\x00")), bytes.HasPrefix(b, []byte("MM\x00*")):
		return "tiff"
	}
	return "bin"
}

// putInt stores v as an element of size bytes, little-endian.
func putInt(b []byte, v int64, size int) {
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, uint64(v))
	}
}

// appendJSONString appends s as a JSON string: control characters, '"'
// and '\' escaped, invalid UTF-8 as U+FFFD — at most 6 bytes a byte.
func appendJSONString(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

func appendBase64(b, s []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, s)
	return append(b, '"')
}

func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// int96Nanos is a legacy INT96 timestamp (nanoseconds of the day, then
// the Julian day) as nanoseconds since the Unix epoch.
func int96Nanos(v [12]byte) int64 {
	nanos := int64(binary.LittleEndian.Uint64(v[:8]))
	day := int64(binary.LittleEndian.Uint32(v[8:]))
	return (day-2440588)*86400e9 + nanos
}

func appendUUID(b, u []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return append(b, '"')
}
