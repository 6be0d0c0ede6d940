package memiavl

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// touchSet is a filter of the keys a tree has changed since a version: a key
// never given to add certainly has not changed; a key mayContain reports
// may have (false positives are rare, about 0.5% per filter at its
// capacity, and only cost a read its shortcut). A tree on a snapshot keeps
// one for the keys changed since the snapshot, so that a point read of any
// other key goes straight to the snapshot's lookup table instead of
// descending the in-memory nodes above it (see Tree.get).
//
// It is a chain of blocked Bloom filters: each key sets 4 bits of one 64-bit
// word, 16 bits per key at a filter's capacity. When the last filter is
// full a filter 8 times larger is added; a read asks each filter, so a set
// is sized ahead where it can (by its snapshot's size, or by the set of the
// interval before). Filters are never cleared nor removed, so a key once
// reported stays reported. The writers of a tree and of its copies may add
// concurrently, and readers on any goroutine may ask meanwhile: the words
// are read and set atomically, and the chain is replaced, never changed,
// under growMu. A key added for a version happens before that version's
// commit, which happens before any read of it, so a reader sees every key
// changed up to the version it reads.
//
// Memory is bounded: when no further filter fits in maxTouchWords words
// the set is full and reports every key.
type touchSet struct {
	from int64 // changes of versions after from are recorded
	// fromHash is the root hash of the tree at from, when a tree started
	// the set for a rewrite of that version (StartNextTouches): a rebase
	// onto a snapshot of another tree of that version must not adopt it
	fromHash []byte
	chain    atomic.Pointer[[]*touchBloom]
	added    atomic.Int64 // keys added to the last filter
	full     atomic.Bool
	growMu   sync.Mutex
}

type touchBloom struct {
	words    []uint64 // a power of two of them
	capacity int64    // keys at 16 bits each
}

// minTouchKeys is the capacity of a set's first filter (8 KiB), unless a
// hint asks for more: most stores of a chain change few keys.
const minTouchKeys = 1 << 12

// maxTouchWords bounds the words of all the filters of a set (32 MiB: the
// chain of filters stops at about 10 million keys). A variable for tests.
var maxTouchWords = 1 << 22

// newTouchSet returns an empty set recording the changes after version
// from, its first filter sized for about hint keys.
func newTouchSet(from int64, hint int64) *touchSet {
	s := &touchSet{from: from}
	capacity := int64(minTouchKeys)
	// clamped first: the next power of two of a hint above 2^62 would
	// not fit an int64
	hint = min(hint, int64(maxTouchWords)*4)
	if hint > capacity {
		capacity = int64(1) << bits.Len64(uint64(hint-1)) // next power of two
	}
	s.chain.Store(&[]*touchBloom{newTouchBloom(capacity)})
	return s
}

func newTouchBloom(capacity int64) *touchBloom {
	return &touchBloom{words: make([]uint64, capacity/4), capacity: capacity}
}

// touchHash is the hash a set files a key under: the snapshot lookup
// table's, so a read that takes the shortcut hashes the key once.
func touchHash(key []byte) uint64 { return snapshot.KeyHash(key) }

// word and mask place hash h: bits 24 and up choose the word, bits 0-23
// the 4 bits in it.
func (b *touchBloom) word(h uint64) *uint64 {
	return &b.words[(h>>24)&uint64(len(b.words)-1)]
}

func touchMask(h uint64) uint64 {
	return 1<<(h&63) | 1<<(h>>6&63) | 1<<(h>>12&63) | 1<<(h>>18&63)
}

func (b *touchBloom) has(h uint64) bool {
	m := touchMask(h)
	return atomic.LoadUint64(b.word(h))&m == m
}

// mayContain reports whether the key of hash h may have been added.
func (s *touchSet) mayContain(h uint64) bool {
	if s.full.Load() {
		return true
	}
	for _, b := range *s.chain.Load() {
		if b.has(h) {
			return true
		}
	}
	return false
}

// add records the key of hash h. It reads and sets one word: a key the
// last filter reports already (a key changed again, mostly) is not counted
// against its capacity; one of an earlier filter is added again.
func (s *touchSet) add(h uint64) {
	if s.full.Load() {
		return
	}
	chain := *s.chain.Load()
	last := chain[len(chain)-1]
	w, m := last.word(h), touchMask(h)
	if atomic.LoadUint64(w)&m == m {
		return
	}
	atomic.OrUint64(w, m)
	if s.added.Add(1) >= last.capacity {
		s.grow(last)
	}
}

// keys returns about how many keys were added, a size hint for the next
// set: every filter but the last holds its capacity.
func (s *touchSet) keys() int64 {
	chain := *s.chain.Load()
	n := s.added.Load()
	for _, b := range chain[:len(chain)-1] {
		n += b.capacity
	}
	return n
}

// grow adds a filter after last, or makes the set full when that would
// pass maxTouchWords.
func (s *touchSet) grow(last *touchBloom) {
	s.growMu.Lock()
	defer s.growMu.Unlock()
	chain := *s.chain.Load()
	if chain[len(chain)-1] != last {
		return // another writer grew it
	}
	words := 0
	for _, b := range chain {
		words += len(b.words)
	}
	// 8 times the last, or what is left of the bound (a power of two of
	// words), if that still holds as many keys as the last
	next := last.capacity * 8
	if room := int64(maxTouchWords-words) * 4; room < next {
		next = 0
		if room >= 4 {
			next = int64(1) << (bits.Len64(uint64(room)) - 1)
		}
	}
	if next < last.capacity {
		s.full.Store(true)
		return
	}
	grown := append(chain[:len(chain):len(chain)], newTouchBloom(next))
	s.added.Store(0)
	s.chain.Store(&grown)
}
