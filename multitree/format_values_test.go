package multitree

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"
)

// TestFormatValuesChecked feeds the decoders of format.go files whose
// checksums are right but whose fields are out of range: TestFormatGolden's
// flipped bits all break the checksum first, so they do not reach these
// checks. Each must be refused with ErrCorrupt, and the values at the
// edge of the range accepted.
func TestFormatValuesChecked(t *testing.T) {
	h := make([]byte, hashSize)
	meta := func(version, initial int64, names ...string) []byte {
		m := &metadata{Version: version, InitialVersion: initial}
		for _, n := range names {
			m.Stores = append(m.Stores, storeInfo{Name: n, Hash: h})
		}
		return m.encode()
	}
	// the metadata file with its format version replaced
	metaFormat := func(f uint32) []byte {
		b := meta(1, 1, "a")
		b = b[:len(b)-4]
		binary.LittleEndian.PutUint32(b[4:], f)
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	}
	decMeta := func(b []byte) error { _, err := decodeMetadata("metadata", b); return err }
	decCur := func(b []byte) error { _, err := decodeCurrent("current", b); return err }
	decRb := func(b []byte) error { _, err := decodeRollback("rollback", b); return err }
	decFirst := func(b []byte) error { _, err := decodeFirst("first", b); return err }
	decRbs := func(b []byte) error { _, err := decodeRollbacks("rollbacks", b); return err }
	longest := strings.Repeat("n", maxStoreName-1)

	for _, c := range []struct {
		name   string
		b      []byte
		decode func([]byte) error
		ok     bool
	}{
		{"metadata, a name of the longest length", meta(1, 1, longest), decMeta, true},
		{"metadata, a name one byte too long", meta(1, 1, longest+"n"), decMeta, false},
		{"metadata, two stores of the same name", meta(1, 1, "a", "a"), decMeta, false},
		{"metadata, negative version", meta(-1, 1, "a"), decMeta, false},
		{"metadata, negative initial version", meta(1, -1, "a"), decMeta, false},
		{"metadata, format version 2", metaFormat(metadataFormat + 1), decMeta, false},
		{"metadata, format version 0", metaFormat(0), decMeta, false},
		{"metadata, version 0, no store", meta(0, 0), decMeta, true},

		{"current, version 0", encodeCurrent(0), decCur, true},
		{"current, negative version", encodeCurrent(-1), decCur, false},
		{"current, version MinInt64", encodeCurrent(math.MinInt64), decCur, false},

		{"rollback, target 1", encodeRollback(1), decRb, true},
		{"rollback, target 0", encodeRollback(0), decRb, false},
		{"rollback, negative target", encodeRollback(-5), decRb, false},
		{"rollback, format version 2", encodeSmall(rollbackMagic, rollbackFormat+1, 7), decRb, false},
		{"rollback, format version 0", encodeSmall(rollbackMagic, 0, 7), decRb, false},
		{"rollback, the magic of rollbacks", encodeSmall(rollbacksMagic, rollbackFormat, 7), decRb, false},

		{"first, version 1", encodeFirst(1), decFirst, true},
		{"first, version 0", encodeFirst(0), decFirst, false},
		{"first, format version 2", encodeSmall(firstMagic, firstFormat+1, 7), decFirst, false},

		{"rollbacks, count 1", encodeRollbacks(1), decRbs, true},
		{"rollbacks, count 0", encodeRollbacks(0), decRbs, false},
		{"rollbacks, format version 2", encodeSmall(rollbacksMagic, rollbacksFormat+1, 7), decRbs, false},
	} {
		err := c.decode(c.b)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case !c.ok && err == nil:
			t.Errorf("%s: accepted", c.name)
		case !c.ok && !errors.Is(err, ErrCorrupt):
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}
