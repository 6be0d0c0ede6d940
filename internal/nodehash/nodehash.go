// Package nodehash computes IAVL node hashes exactly as cosmos/iavl v1 does.
//
// A node's hash is sha256 over:
//
//	varint(height) | varint(size) | varint(version) |
//	leaf:  uvarint(len(key)) key | 0x20 sha256(value)
//	inner: 0x20 leftHash | 0x20 rightHash
//
// where varint is the zigzag encoding of encoding/binary.PutVarint. The empty
// tree hashes to sha256("").
package nodehash

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"
)

// Size is the length of every node hash.
const Size = sha256.Size

// emptyHash is sha256 of the empty input.
var emptyHash = sha256.Sum256(nil)

// Empty returns the hash of the empty tree, sha256("").
func Empty() []byte {
	h := emptyHash
	return h[:]
}

type hasher struct {
	h   hash.Hash
	buf []byte
}

var pool = sync.Pool{New: func() any {
	return &hasher{h: sha256.New(), buf: make([]byte, 0, 256)}
}}

func appendHeader(buf []byte, height uint8, size, version int64) []byte {
	buf = binary.AppendVarint(buf, int64(height))
	buf = binary.AppendVarint(buf, size)
	buf = binary.AppendVarint(buf, version)
	return buf
}

// Leaf appends the hash of a leaf node to dst and returns the result.
func Leaf(dst []byte, key, value []byte, version int64) []byte {
	vh := sha256.Sum256(value)
	return LeafWithValueHash(dst, key, vh[:], version)
}

// LeafWithValueHash is Leaf for a caller that already holds sha256(value).
func LeafWithValueHash(dst []byte, key, valueHash []byte, version int64) []byte {
	hs := pool.Get().(*hasher)
	buf := appendHeader(hs.buf[:0], 0, 1, version)
	buf = binary.AppendUvarint(buf, uint64(len(key)))
	if len(buf)+len(key)+1+Size <= cap(buf) {
		buf = append(buf, key...)
		buf = append(buf, Size)
		buf = append(buf, valueHash...)
		hs.h.Reset()
		hs.h.Write(buf)
	} else {
		hs.h.Reset()
		hs.h.Write(buf)
		hs.h.Write(key)
		buf = append(buf[:0], Size)
		buf = append(buf, valueHash...)
		hs.h.Write(buf)
	}
	dst = hs.h.Sum(dst)
	hs.buf = buf[:0]
	pool.Put(hs)
	return dst
}

// Inner appends the hash of an inner node to dst and returns the result.
func Inner(dst []byte, height uint8, size, version int64, left, right []byte) []byte {
	var arr [3*binary.MaxVarintLen64 + 2 + 2*Size]byte
	buf := appendHeader(arr[:0], height, size, version)
	buf = append(buf, Size)
	buf = append(buf, left...)
	buf = append(buf, Size)
	buf = append(buf, right...)
	sum := sha256.Sum256(buf)
	return append(dst, sum[:]...)
}
