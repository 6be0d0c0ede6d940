package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestAddSubtreeVersionZero: a node of version 0 is outside the format's
// [1, tree version], and AddLeaf/AddBranch refuse it; AddSubtree, which
// checks versions as the node-by-node path checks them, refuses it too
// (ErrCorrupt: the source snapshot holds it) instead of writing a snapshot
// that Verify then rejects.
func TestAddSubtreeVersionZero(t *testing.T) {
	orig := smallSnapshot(t, true)
	cases := []struct {
		name string
		file string
		off  uint64
	}{
		{"leaf version 0", FileLeaves, 3*RecordSize + leafOffVersion},
		{"branch version 0", FileBranches, 0*RecordSize + branchOffVersion},
	}
	for _, c := range cases {
		files := map[string][]byte{}
		for k, v := range orig {
			files[k] = v
		}
		b := bytes.Clone(orig[c.file])
		binary.LittleEndian.PutUint64(b[c.off:], 0)
		files[c.file] = b
		s, err := openMem("mem", files)
		if err != nil {
			t.Fatal(err)
		}
		got, err := copyWhole(t, s, 9)
		if err == nil {
			// what the copy wrote fails Verify
			cs, oerr := openMem("copy", got)
			verr := oerr
			if oerr == nil {
				verr = cs.Verify()
			}
			t.Errorf("%s: AddSubtree copied it (Verify of the copy: %v), want an error wrapping ErrCorrupt", c.name, verr)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}
