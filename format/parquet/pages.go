package parquet

import (
	"fmt"
	"hash/crc32"

	pq "github.com/apache/arrow-go/v18/parquet"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkPages walks a column chunk's page headers before arrow-go reads
// it: the pages must tile the chunk, hold the values the footer counts,
// each page's sizes must fit the chunk (so a lying header cannot make the
// reader allocate past what the footer allows), a page's CRC must match
// where the writer wrote one (arrow-go does not check it), and the
// encodings must be those the resident bound was computed for: a
// dictionary the footer did not declare, or the one indexed changed, or a
// front-coded page where the footer listed none, is damage.
func checkPages(m *colMeta, n *node, b []byte) error {
	var values int64
	for pos, i := 0, 0; pos < len(b); i++ {
		h, err := parsePageHeader(b[pos:])
		if err != nil {
			return fmt.Errorf("page %d's header at byte %d: %v", i, pos, err)
		}
		end := int64(pos) + int64(h.len) + int64(h.comp)
		if end > int64(len(b)) {
			return fmt.Errorf("page %d ends at byte %d of a %d-byte column chunk (truncated)", i, end, len(b))
		}
		if int64(h.unc) > m.unc || int64(h.comp) > pq.DefaultMaxCompressedPageSize || int64(h.unc) > pq.DefaultMaxUncompressedPageSize {
			return fmt.Errorf("page %d of %d bytes (%d compressed) does not fit its column chunk of %d bytes or arrow-go's page limits", i, h.unc, h.comp, m.unc)
		}
		body := b[pos+h.len : end]
		if h.hasCRC && crc32.ChecksumIEEE(body) != h.crc {
			return fmt.Errorf("page %d fails its CRC32 (%08x, its header says %08x)", i, crc32.ChecksumIEEE(body), h.crc)
		}
		switch h.typ {
		case pageDict:
			if i != 0 {
				return fmt.Errorf("page %d is a dictionary after data pages", i)
			}
			if !m.dict {
				return fmt.Errorf("a dictionary page the footer does not declare")
			}
			if int64(h.numValues)*minPlainLen(n) > int64(h.unc) {
				return fmt.Errorf("a dictionary of %d values does not fit its page of %d bytes", h.numValues, h.unc)
			}
		case pageData, pageDataV2:
			switch h.encoding {
			case encPlainDict, encRLEDict:
				if !m.dict {
					return fmt.Errorf("page %d is dictionary-encoded, which the footer does not declare", i)
				}
			case encDeltaByteArray:
				if !m.front {
					return fmt.Errorf("page %d is DELTA_BYTE_ARRAY, which the footer does not declare", i)
				}
			}
			if h.typ == pageDataV2 && (h.levelsLen > h.comp || h.levelsLen > h.unc || h.numRows < 0) {
				return fmt.Errorf("page %d's levels (%d bytes) do not fit it", i, h.levelsLen)
			}
			values += int64(h.numValues)
		case pageIndex:
		default:
			return fmt.Errorf("page %d has type %d", i, h.typ)
		}
		pos = int(end)
	}
	if values != m.numValues {
		return fmt.Errorf("the pages hold %d values, the footer counts %d", values, m.numValues)
	}
	return nil
}

// minPlainLen is the least a PLAIN value of column n takes.
func minPlainLen(n *node) int64 {
	switch n.el.phys {
	case tyBytes, tyInt32, tyFloat:
		return 4
	case tyInt64, tyDouble:
		return 8
	case tyInt96:
		return 12
	case tyFixed:
		return int64(n.el.typeLen)
	}
	return 0
}
