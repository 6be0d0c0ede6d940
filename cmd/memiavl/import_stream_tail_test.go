package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"
)

// exportedStream makes a small database, exports it with `export`, and
// returns the export's path and its decompressed stream of items.
func exportedStream(t *testing.T) (path string, plain []byte) {
	t.Helper()
	db := t.TempDir()
	makeDB(t, db, 0.01, 20, 10)
	os.Remove(filepath.Join(db, "LOCK"))
	path = filepath.Join(t.TempDir(), "good.bin")
	mustCLI(t, "export", db, path)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	plain, err = io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return path, plain
}

// wasmExtension is the item that starts the part of a snapshot extension
// "wasm" in format 1.
func wasmExtension() snapshottypes.SnapshotItem {
	return snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_Extension{Extension: &snapshottypes.SnapshotExtensionMeta{Name: "wasm", Format: 1}}}
}

// extensionPayload is an extension payload item carrying p.
func extensionPayload(p []byte) snapshottypes.SnapshotItem {
	return snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_ExtensionPayload{ExtensionPayload: &snapshottypes.SnapshotExtensionPayload{Payload: p}}}
}

// tailStreamItems exports a small database and returns its stream's items.
func tailStreamItems(t *testing.T) []snapshottypes.SnapshotItem {
	t.Helper()
	_, plain := exportedStream(t)
	rd := protoio.NewDelimitedReader(bytes.NewReader(plain), 64<<20)
	var items []snapshottypes.SnapshotItem
	for {
		var it snapshottypes.SnapshotItem
		if err := rd.ReadMsg(&it); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	return items
}

func tailEncode(t *testing.T, items []snapshottypes.SnapshotItem) []byte {
	t.Helper()
	var plain bytes.Buffer
	w := protoio.NewDelimitedWriter(&plain)
	for i := range items {
		if err := w.WriteMsg(&items[i]); err != nil {
			t.Fatal(err)
		}
	}
	var comp bytes.Buffer
	zw := zlib.NewWriter(&comp)
	zw.Write(plain.Bytes())
	zw.Close()
	return comp.Bytes()
}

// TestCLIImportStoreAfterExtension: a stream with a store after an
// extension item (and a sound checksum) is refused, as the SDK's snapshot
// manager refuses an item after the multistore's part that is not an
// extension; the store is not left out with the extensions.
func TestCLIImportStoreAfterExtension(t *testing.T) {
	items := tailStreamItems(t)
	var storeIdx []int
	for i, it := range items {
		if it.GetStore() != nil {
			storeIdx = append(storeIdx, i)
		}
	}
	if len(storeIdx) < 2 {
		t.Fatalf("want at least 2 stores, got %d", len(storeIdx))
	}
	last := storeIdx[len(storeIdx)-1]
	lastName := items[last].GetStore().Name
	ext, pay := wasmExtension(), extensionPayload([]byte("p"))
	var mixed []snapshottypes.SnapshotItem
	mixed = append(mixed, items[:last]...)
	mixed = append(mixed, ext, pay)
	mixed = append(mixed, items[last:]...)
	f := filepath.Join(t.TempDir(), "mixed.bin")
	if err := os.WriteFile(f, tailEncode(t, mixed), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "db")
	code, out, errs := cli(t, "import", "--height", "20", f, dst)
	if code == 0 {
		t.Errorf("import of a stream with store %q after an extension item: exit 0 (store silently dropped), want a failed import as the SDK's manager refuses it\nstdout %q\nstderr %q", lastName, out, errs)
	}
}

// TestCLIImportInterruptedWhileDraining: an interrupt while import reads
// the file after the stores fails the import
// (exit 1, nothing imported), as the help promises for an interrupt before
// the stream's end. The file is a FIFO: the stores and the extension item
// come first, the rest only after the interrupt.
func TestCLIImportInterruptedWhileDraining(t *testing.T) {
	items := tailStreamItems(t)
	ext, pay := wasmExtension(), extensionPayload(bytes.Repeat([]byte("w"), 4<<20))
	var head, tail bytes.Buffer
	w := protoio.NewDelimitedWriter(&head)
	for i := range items {
		w.WriteMsg(&items[i])
	}
	w.WriteMsg(&ext)
	protoio.NewDelimitedWriter(&tail).WriteMsg(&pay)
	fifo := filepath.Join(t.TempDir(), "s.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		zw := zlib.NewWriter(f)
		zw.Write(head.Bytes())
		zw.Flush()
		time.Sleep(500 * time.Millisecond)
		cancel()
		time.Sleep(100 * time.Millisecond)
		zw.Write(tail.Bytes())
		zw.Close()
	}()
	dst := filepath.Join(t.TempDir(), "db")
	var out, errs bytes.Buffer
	err := runImport(ctx, &out, &errs, fifo, dst, 20, nil)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("import interrupted while draining: %v (want an interrupted import)", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "current")); err == nil {
		t.Fatalf("the interrupted import left a database")
	}
}

// TestCLIImportDrainDamage: the drain refuses a file cut after the
// extension item, with bytes after the zlib stream, or with a zero item
// after the stores.
func TestCLIImportDrainDamage(t *testing.T) {
	items := tailStreamItems(t)
	ext, pay := wasmExtension(), extensionPayload(bytes.Repeat([]byte("w"), 1<<20))
	enc := tailEncode(t, append(items, ext, pay))
	for name, data := range map[string][]byte{
		"truncated": enc[:len(enc)-2],
		"garbage":   append(append([]byte{}, enc...), 0),
		// a zero item (no type) after the stores, then more: refused
		"zero item": tailEncode(t, append(append([]snapshottypes.SnapshotItem{}, items...), snapshottypes.SnapshotItem{}, ext, pay)),
	} {
		f := filepath.Join(t.TempDir(), name+".bin")
		os.WriteFile(f, data, 0o644)
		dst := filepath.Join(t.TempDir(), "db")
		code, out, errs := cli(t, "import", "--height", "20", f, dst)
		if code == 0 {
			t.Errorf("%s: exit 0\n%s\n%s", name, out, errs)
		}
		if _, err := os.Stat(filepath.Join(dst, "current")); err == nil {
			t.Errorf("%s: left a database", name)
		}
	}
}
