package main

import (
	"bytes"
	"compress/zlib"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"
)

// TestCLIImportDamagedStreamWithExtension: an SDK state-sync snapshot of a
// chain with snapshot extensions (wasm, ...) is the multistore's items, then
// the extensions' items, in one zlib stream, which `import` takes (it keeps
// the stores and ignores the extensions, with a note). The file's only
// integrity check is zlib's checksum at the end of the stream, after the
// extensions: the import reads the file to its end before it commits, so
// that a damaged file is refused (exit 1, no database left) with extensions
// as without, and a sound one gives the source's app hash.
func TestCLIImportDamagedStreamWithExtension(t *testing.T) {
	good, plain := exportedStream(t)
	files := t.TempDir()
	// find a leaf value to damage
	rd := protoio.NewDelimitedReader(bytes.NewReader(plain), 64<<20)
	var value []byte
	for {
		var it snapshottypes.SnapshotItem
		if err := rd.ReadMsg(&it); err != nil {
			break
		}
		if n := it.GetIAVL(); n != nil && n.Height == 0 && len(n.Value) >= 8 && bytes.Count(plain, n.Value) == 1 {
			value = n.Value
			break
		}
	}
	if value == nil {
		t.Fatal("no unique leaf value in the stream")
	}
	// the stores, then an extension and its payload, as the snapshot manager writes
	var full bytes.Buffer
	full.Write(plain)
	w := protoio.NewDelimitedWriter(&full)
	ext, pay := wasmExtension(), extensionPayload(bytes.Repeat([]byte("w"), 1<<20))
	for _, it := range []*snapshottypes.SnapshotItem{&ext, &pay} {
		if err := w.WriteMsg(it); err != nil {
			t.Fatal(err)
		}
	}
	// stored (uncompressed) deflate blocks: the value's bytes appear as is
	var comp bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&comp, zlib.NoCompression)
	zw.Write(full.Bytes())
	zw.Close()
	enc := comp.Bytes()
	// the sound file imports with the source's app hash
	sound := filepath.Join(files, "sound.bin")
	if err := os.WriteFile(sound, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	hash := func(out string) string {
		t.Helper()
		k := strings.Index(out, "app hash ")
		if k < 0 {
			t.Fatalf("no app hash in %q", out)
		}
		return strings.TrimSpace(out[k:])
	}
	want := hash(mustCLI(t, "import", "--height", "20", good, filepath.Join(t.TempDir(), "db")))
	code, out, errs := cli(t, "import", "--height", "20", sound, filepath.Join(t.TempDir(), "db"))
	if code != 0 || !strings.Contains(errs, "was ignored") || hash(out) != want {
		t.Fatalf("import of a sound file with an extension: exit %d, stdout %q, stderr %q (want exit 0, the note, %s)", code, out, errs, want)
	}
	i := bytes.Index(enc, value)
	if i < 0 {
		t.Fatal("value not found in the stored blocks")
	}
	enc[i] ^= 0x01 // one bit of one value
	f := filepath.Join(files, "damaged.bin")
	if err := os.WriteFile(f, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	// the damage is there: the file does not decompress
	if zr, err := zlib.NewReader(bytes.NewReader(enc)); err == nil {
		if _, err := io.ReadAll(zr); err == nil {
			t.Fatal("the damaged file decompresses without error")
		}
	}
	dst := filepath.Join(t.TempDir(), "db")
	code, out, errs = cli(t, "import", "--height", "20", f, dst)
	if code == 0 {
		t.Errorf("import of a file whose zlib checksum fails: exit 0\nstdout %q\nstderr %q", out, errs)
	}
	if _, err := os.Stat(filepath.Join(dst, "current")); err == nil {
		t.Errorf("the failed import left a database in %s", dst)
	}
}
