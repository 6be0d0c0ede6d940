package compat_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"testing"

	"cosmossdk.io/store/snapshots"
	"cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// sdkSnapshotChunkHashes are the SHA-256 hashes of the state-sync chunks
// that cosmossdk.io/store v1.1.1 pins for its generated multistore
// (rootmulti/snapshot_test.go, TestMultistoreSnapshot_Checksum, format 1):
// nodes must produce identical chunks for a state sync to take chunks from
// several of them.
var sdkSnapshotChunkHashes = []string{
	"503e5b51b657055b77e88169fadae543619368744ad15f1de0736c0a20482f24",
	"e1a0daaa738eeb43e778aefd2805e3dd720798288a410b06da4b8459c4d8f72e",
	"aa048b4ee0f484965d7b3b06822cf0772cdcaad02f3b1b9055e69f2cb365ef3c",
	"7921eaa3ed4921341e504d9308a9877986a879fe216a099c86e8db66fcba4c63",
	"a4a864e6c02c9fca5837ec80dc84f650b25276ed7e4820cf7516ced9f9901b86",
	"980925390cc50f14998ecb1e87de719ca9dd7e72f5fefbe445397bf670f36c31",
}

// TestSDKSnapshotChecksumVector: the SDK's own state-sync vector (5 stores
// of 10,000 keys with 1 KiB random values, seed 49872768940, one commit),
// written through the SDK's chunking stream writer, gives the chunks the SDK
// pins, byte for byte.
func TestSDKSnapshotChecksumVector(t *testing.T) {
	ms, err := compat.NewMultiStore(t.TempDir(), nil, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	r := rand.New(rand.NewSource(49872768940))
	var keys []*types.KVStoreKey
	for i := 0; i < 5; i++ {
		key := types.NewKVStoreKey(fmt.Sprintf("store%v", i))
		ms.MountStoreWithDB(key, types.StoreTypeIAVL, nil)
		keys = append(keys, key)
	}
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		st := ms.GetCommitKVStore(key)
		for i := uint64(0); i < 10000; i++ {
			k := make([]byte, 8)
			v := make([]byte, 1024)
			binary.BigEndian.PutUint64(k, i)
			if _, err := r.Read(v); err != nil {
				t.Fatal(err)
			}
			st.Set(k, v)
		}
	}
	ms.Commit()
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	version := uint64(ms.LastCommitID().Version)

	ch := make(chan io.ReadCloser)
	errc := make(chan error, 1)
	go func() {
		w := snapshots.NewStreamWriter(ch)
		err := ms.Snapshot(version, w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		errc <- err
	}()
	var got []string
	h := sha256.New()
	for chunk := range ch {
		h.Reset()
		_, err := io.Copy(h, chunk)
		chunk.Close()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, hex.EncodeToString(h.Sum(nil)))
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sdkSnapshotChunkHashes) {
		t.Fatalf("%d chunks, the SDK pins %d", len(got), len(sdkSnapshotChunkHashes))
	}
	for i := range got {
		if got[i] != sdkSnapshotChunkHashes[i] {
			t.Fatalf("chunk %d: sha256 %s, the SDK pins %s", i, got[i], sdkSnapshotChunkHashes[i])
		}
	}
}
