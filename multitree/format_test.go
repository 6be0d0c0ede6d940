package multitree

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// The bytes of the small files of format.go, pinned: a change to any of
// them is a new format version.
const (
	goldenCurrent   = "5043544d0a0000000000000019d7ea99"         // current, version 10
	goldenRollback  = "5242544d010000001900000000000000cb9dfd3d" // rollback, target 25
	goldenRollbacks = "5242434d0100000003000000000000009d4f1892" // rollbacks, count 3
	// metadata of version 10, initial version 1, stores b and a (sorted)
	goldenMetadata = "444d544d010000000a000000000000000100000000000000020000000100610101" +
		"010101010101010101010101010101010101010101010101010101010101010062" +
		"02020202020202020202020202020202020202020202020202020202020202022f" +
		"a59b30"
)

func TestFormatGolden(t *testing.T) {
	h := func(b byte) []byte {
		out := make([]byte, hashSize)
		for i := range out {
			out[i] = b
		}
		return out
	}
	meta := &metadata{Version: 10, InitialVersion: 1, Stores: []storeInfo{{"b", h(2)}, {"a", h(1)}}}
	for _, c := range []struct {
		name   string
		got    []byte
		want   string
		decode func(b []byte) error
	}{
		{"current", encodeCurrent(10), goldenCurrent, func(b []byte) error {
			v, err := decodeCurrent("current", b)
			if err == nil && v != 10 {
				t.Fatalf("current decodes to %d", v)
			}
			return err
		}},
		{"rollback", encodeRollback(25), goldenRollback, func(b []byte) error {
			v, err := decodeRollback("rollback", b)
			if err == nil && v != 25 {
				t.Fatalf("rollback decodes to %d", v)
			}
			return err
		}},
		{"rollbacks", encodeRollbacks(3), goldenRollbacks, func(b []byte) error {
			n, err := decodeRollbacks("rollbacks", b)
			if err == nil && n != 3 {
				t.Fatalf("rollbacks decodes to %d", n)
			}
			return err
		}},
		{"metadata", meta.encode(), goldenMetadata, func(b []byte) error {
			m, err := decodeMetadata("metadata", b)
			if err == nil && (m.Version != 10 || m.InitialVersion != 1 || len(m.Stores) != 2 || m.Stores[0].Name != "a") {
				t.Fatalf("metadata decodes to %+v", m)
			}
			return err
		}},
	} {
		if got := hex.EncodeToString(c.got); got != c.want {
			t.Errorf("%s encodes to %s, pinned %s", c.name, got, c.want)
			continue
		}
		if err := c.decode(c.got); err != nil {
			t.Errorf("%s: the pinned bytes do not decode: %v", c.name, err)
		}
		// every flipped bit and every shorter or longer file is refused
		for i := range c.got {
			for bit := 0; bit < 8; bit++ {
				b := append([]byte(nil), c.got...)
				b[i] ^= 1 << bit
				if err := c.decode(b); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s with bit %d of byte %d flipped: %v", c.name, bit, i, err)
				}
			}
		}
		for _, b := range [][]byte{c.got[:len(c.got)-1], append(append([]byte(nil), c.got...), 0), nil} {
			if err := c.decode(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s of %d bytes: %v", c.name, len(b), err)
			}
		}
	}
}

// FuzzDecode feeds the decoders of format.go arbitrary bytes, both as they
// come and with a valid checksum appended (so that the fuzzer reaches past
// it): they must not panic, must refuse with ErrCorrupt, and what they
// accept must encode back to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, g := range []string{goldenCurrent, goldenRollback, goldenRollbacks, goldenMetadata} {
		b, _ := hex.DecodeString(g)
		f.Add(b)
		f.Add(b[:len(b)-4])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		withCRC := binary.LittleEndian.AppendUint32(bytes.Clone(b), crc32.Checksum(b, castagnoli))
		for _, in := range [][]byte{b, withCRC} {
			if m, err := decodeMetadata("metadata", in); err == nil {
				if !bytes.Equal(m.encode(), in) {
					t.Fatalf("metadata %x decodes to %+v, which encodes to %x", in, m, m.encode())
				}
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("metadata %x: %v", in, err)
			}
			if v, err := decodeCurrent("current", in); err == nil {
				if !bytes.Equal(encodeCurrent(v), in) {
					t.Fatalf("current %x decodes to %d", in, v)
				}
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("current %x: %v", in, err)
			}
			if n, err := decodeRollbacks("rollbacks", in); err == nil {
				if !bytes.Equal(encodeRollbacks(n), in) {
					t.Fatalf("rollbacks %x decodes to %d", in, n)
				}
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("rollbacks %x: %v", in, err)
			}
			if v, err := decodeRollback("rollback", in); err == nil {
				if !bytes.Equal(encodeRollback(v), in) {
					t.Fatalf("rollback %x decodes to %d", in, v)
				}
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("rollback %x: %v", in, err)
			}
		}
	})
}

// TestFinishingMarkerPinned pins the content of the import marker of an
// import with a Finish step, which Open reads to refuse the directory.
func TestFinishingMarkerPinned(t *testing.T) {
	if string(finishingMarker) != "finishing\n" {
		t.Fatalf("the finishing marker is %q, pinned %q", finishingMarker, "finishing\n")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		content []byte
		want    bool
	}{{nil, false}, {[]byte{}, false}, {[]byte("finishing\n"), true}, {[]byte("finishing"), true}} {
		_ = os.Remove(filepath.Join(dir, importFileName))
		if err := writeMarker(dir, c.content); err != nil {
			t.Fatal(err)
		}
		if got, err := unfinishedImport(dir); err != nil || got != c.want {
			t.Errorf("marker %q: unfinished %v %v, want %v", c.content, got, err, c.want)
		}
	}
	// other content than the marker's is damage: refused as an
	// unfinished import, and as corrupt
	if err := writeMarker(dir, []byte("finishing")); err != nil {
		t.Fatal(err)
	}
	if err := refuseUnfinished(dir); !errors.Is(err, ErrUnfinishedImport) || !errors.Is(err, ErrCorrupt) {
		t.Errorf("damaged marker: %v, want ErrUnfinishedImport and ErrCorrupt", err)
	}
	if err := writeMarker(dir, finishingMarker); err != nil {
		t.Fatal(err)
	}
	if err := refuseUnfinished(dir); !errors.Is(err, ErrUnfinishedImport) || errors.Is(err, ErrCorrupt) {
		t.Errorf("finishing marker: %v, want ErrUnfinishedImport only", err)
	}
	// giving a database up keeps an existing marker's content until it
	// removes the marker
	if err := writeMarker(dir, finishingMarker); err != nil {
		t.Fatal(err)
	}
	if err := writeImportMarker(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := unfinishedImport(dir); !got {
		t.Error("writeImportMarker changed the content of the finishing marker")
	}
}
