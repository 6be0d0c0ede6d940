// Package workload generates a deterministic, seeded chain workload: the
// per-block changesets of a few module stores shaped like a Cosmos SDK
// chain's bank, staking and lockup modules, with realistic key and value
// sizes and a mix of inserts, updates and deletes.
//
// A Generator is a pure function of its Config and the version: Block(v)
// returns the same changesets whatever was generated before, in any order,
// from any goroutine. Version 1 is the genesis block, which fills the stores;
// every later version is a regular block of a few thousand pairs (at Scale
// 1). Applying blocks 1..v in order gives the state at v.
//
// # Stores
//
//   - bank: balances, key 0x02 | 20 | 20-byte address | denom (27 bytes, or
//     90 for the 1 in 32 with an IBC denom), value a Coin-like record of 40
//     to 80 bytes. Most
//     changes update existing balances; new balances are inserted and a
//     share of them is emptied (deleted) some blocks later.
//   - staking: delegations, key 0x31 | 20 | delegator | 20 | validator (43
//     bytes), value 100 to 250 bytes; validators, key 0x21 | 20 | operator
//     (22 bytes), value 300 to 400 bytes, a small fixed set updated every
//     block. Half of the new delegations are undelegated (deleted) later.
//   - lockup: each lock is a record under 0x02 | id (9 bytes, id big-endian)
//     of about 200 bytes and an index entry under 0x01 | end time (unix
//     nanoseconds, big-endian) | id (17 bytes) holding the id. Locks expire
//     a fixed number of blocks after they are created: both keys are
//     deleted. Genesis locks expire over the first blocks.
//
// Within a changeset the pairs are sorted by key and each key appears once,
// as the SDK's cache stores write them at commit.
package workload

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// Config selects a workload. The zero value is the default workload with
// seed 0.
type Config struct {
	// Seed selects the keys and values; the same seed gives the same blocks.
	Seed uint64
	// Scale multiplies the genesis state and the pairs of every block. 0
	// means 1; at most MaxScale. The generator's memory grows with it (its
	// genesis state at scale 1 is 160,150 pairs, and it keeps the keys).
	Scale float64
}

// MaxScale is the largest Config.Scale, 16 million pairs of genesis state.
// The generator, and a database syncing its blocks, need memory in
// proportion to the scale (a few GiB per 10).
const MaxScale = 100

// Store names, in the order Stores returns them.
const (
	Bank    = "bank"
	Staking = "staking"
	Lockup  = "lockup"
)

// GenesisTime is the block time of version 1; each block adds BlockTime.
var GenesisTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// BlockTime is the time between two blocks.
const BlockTime = 6 * time.Second

// family is one kind of record of a store: an index space of entries, each
// created at genesis or by a block, some of them deleted a fixed number of
// blocks after they were created.
type family struct {
	genesis int     // entries created by version 1
	inserts int     // entries created by each later version
	updates int     // updates of live entries per block
	mortal  float64 // share of entries created by blocks that are deleted later
	life    int64   // blocks between the creation and the deletion of a mortal entry
	// genesisLife, when > 0, makes every genesis entry mortal: entry i
	// is deleted by version 2 + i%genesisLife.
	genesisLife int64
}

// Generator produces the blocks of one workload. It is immutable and safe
// for concurrent use.
type Generator struct {
	cfg        Config
	bank       family
	delegation family
	validators int
	valUpdates int
	lock       family
}

// New returns the generator of cfg.
func New(cfg Config) (*Generator, error) {
	if cfg.Scale == 0 {
		cfg.Scale = 1
	}
	if cfg.Scale < 0 || math.IsNaN(cfg.Scale) || math.IsInf(cfg.Scale, 0) || cfg.Scale > MaxScale {
		return nil, fmt.Errorf("workload: scale %v out of range (0, %d]", cfg.Scale, MaxScale)
	}
	n := func(x float64) int { return max(1, int(math.Round(x*cfg.Scale))) }
	g := &Generator{cfg: cfg}
	g.bank = family{genesis: n(100_000), inserts: n(300), updates: n(1700), mortal: 0.3, life: 50}
	g.delegation = family{genesis: n(20_000), inserts: n(60), updates: n(300), mortal: 0.5, life: 100}
	g.validators = n(150)
	g.valUpdates = min(g.validators, n(50))
	g.lock = family{genesis: n(20_000), inserts: n(150), updates: n(100), mortal: 1, life: 200, genesisLife: 100}
	return g, nil
}

// Config returns the generator's configuration with defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Stores returns the names of the workload's stores.
func (g *Generator) Stores() []string { return []string{Bank, Lockup, Staking} }

// BlockTimeOf returns the block time of version v.
func BlockTimeOf(v int64) time.Time { return GenesisTime.Add(time.Duration(v-1) * BlockTime) }

// Block returns the changesets of version v (v >= 1), one per store, in the
// order of Stores. The slices are freshly allocated: the caller may keep or
// hand them to a database that retains them.
func (g *Generator) Block(v int64) []wal.ChangeSet {
	if v < 1 {
		panic(fmt.Sprintf("workload: version %d < 1", v))
	}
	return []wal.ChangeSet{
		{Name: Bank, Pairs: g.bankPairs(v)},
		{Name: Lockup, Pairs: g.lockPairs(v)},
		{Name: Staking, Pairs: g.stakingPairs(v)},
	}
}

// Pairs returns the number of pairs of version v without building values.
func (g *Generator) Pairs(v int64) int {
	n := 0
	for _, cs := range g.Block(v) {
		n += len(cs.Pairs)
	}
	return n
}

// store ids mix into the seeds
const (
	idBank uint64 = iota + 1
	idDelegation
	idValidator
	idLock
)

// rng returns the random source of one store in one version.
func (g *Generator) rng(store uint64, v int64) *rand.Rand {
	return rand.New(rand.NewPCG(g.cfg.Seed^mix(store*0x9E3779B97F4A7C15), uint64(v)))
}

// mix is splitmix64's finaliser: a bijective hash of x.
func mix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// hash returns a hash of entry i of a store family under the seed.
func (g *Generator) hash(store, i uint64) uint64 {
	return mix(mix(g.cfg.Seed^store<<56) ^ i)
}

// appendHashBytes appends n bytes derived from (store, i, salt).
func (g *Generator) appendHashBytes(dst []byte, store, i, salt uint64, n int) []byte {
	h := g.hash(store, i) ^ mix(salt)
	for n > 0 {
		h = mix(h)
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], h)
		k := min(n, 8)
		dst = append(dst, b[:k]...)
		n -= k
	}
	return dst
}

// created returns how many entries of f exist before version v's inserts.
func (f *family) created(v int64) int {
	if v <= 1 {
		return 0
	}
	return f.genesis + int(v-2)*f.inserts
}

// born returns the version that creates entry i.
func (f *family) born(i int) int64 {
	if i < f.genesis {
		return 1
	}
	return 2 + int64((i-f.genesis)/f.inserts)
}

// death returns the version that deletes entry i, 0 if it is never deleted.
func (g *Generator) death(f *family, store uint64, i int) int64 {
	if i < f.genesis {
		if f.genesisLife > 0 {
			return 2 + int64(i)%f.genesisLife
		}
		return 0
	}
	if f.mortal >= 1 || float64(g.hash(store, uint64(i))>>11)/(1<<53) < f.mortal {
		return f.born(i) + f.life
	}
	return 0
}

// alive reports whether entry i exists after version v and is not deleted
// by v+1 either (so an update at v+1 never touches an entry that v+1
// deletes).
func (g *Generator) aliveThrough(f *family, store uint64, i int, v int64) bool {
	d := g.death(f, store, i)
	return d == 0 || d > v
}

// changes returns the entries of f that version v creates, updates and
// deletes.
func (g *Generator) changes(f *family, store uint64, v int64, r *rand.Rand) (ins, upd, del []int) {
	if v == 1 {
		ins = make([]int, f.genesis)
		for i := range ins {
			ins[i] = i
		}
		return ins, nil, nil
	}
	start := f.created(v)
	for i := start; i < start+f.inserts; i++ {
		ins = append(ins, i)
	}
	// deletions: entries created life blocks ago, and genesis entries
	if b := v - f.life; b >= 2 {
		s := f.created(b)
		for i := s; i < s+f.inserts; i++ {
			if g.death(f, store, i) == v {
				del = append(del, i)
			}
		}
	}
	if f.genesisLife > 0 && v-2 < f.genesisLife {
		for i := int(v - 2); i < f.genesis; i += int(f.genesisLife) {
			del = append(del, i)
		}
	}
	// updates: skewed towards recently created entries, never of an entry
	// this block deletes
	if start > 0 {
		for range f.updates {
			for try := 0; try < 4; try++ {
				var i int
				if r.IntN(2) == 0 {
					i = r.IntN(start)
				} else {
					u := r.Float64()
					i = start - 1 - int(float64(start)*u*u*u)
				}
				if g.aliveThrough(f, store, i, v) {
					upd = append(upd, i)
					break
				}
			}
		}
	}
	return ins, upd, del
}

// finish sorts pairs by key and keeps the last change of each key.
func finish(pairs []wal.KVPair) []wal.KVPair {
	type seqPair struct {
		p   wal.KVPair
		seq int
	}
	tmp := make([]seqPair, len(pairs))
	for i, p := range pairs {
		tmp[i] = seqPair{p, i}
	}
	slices.SortFunc(tmp, func(a, b seqPair) int {
		if c := bytes.Compare(a.p.Key, b.p.Key); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	out := pairs[:0]
	for i, sp := range tmp {
		if i+1 < len(tmp) && bytes.Equal(sp.p.Key, tmp[i+1].p.Key) {
			continue
		}
		out = append(out, sp.p)
	}
	return slices.Clip(out)
}

// ---- bank

var denoms = []string{"uatom", "uosmo", "stake", "ujuno", "uusdc", "ibc/27394FB092D2ECCD56123C74F36E4C1F926001CEADA9CA97EA622B25F41E5EB2"}

// BankKey returns the balance key of bank entry i.
func (g *Generator) BankKey(i int) []byte {
	h := g.hash(idBank, uint64(i))
	d := denoms[h%4] // mostly short denoms
	if h>>60 == 0 {
		d = denoms[4+(h>>59)&1]
	}
	k := make([]byte, 0, 22+len(d))
	k = append(k, 0x02, 20)
	k = g.appendHashBytes(k, idBank, uint64(i), 1, 20)
	return append(k, d...)
}

func bankValue(r *rand.Rand, key []byte) []byte {
	denom := key[22:]
	if len(denom) > 40 {
		denom = denom[:40] // the record keeps a short denom trace
	}
	digits := 1 + 40 - len(denom) + r.IntN(30)
	n := 4 + len(denom) + digits
	v := make([]byte, 0, n)
	v = append(v, 0x0a, byte(len(denom)))
	v = append(v, denom...)
	v = append(v, 0x12, byte(digits))
	v = append(v, '1'+byte(r.IntN(9)))
	for len(v) < n {
		v = append(v, '0'+byte(r.IntN(10)))
	}
	return v
}

func (g *Generator) bankPairs(v int64) []wal.KVPair {
	r := g.rng(idBank, v)
	ins, upd, del := g.changes(&g.bank, idBank, v, r)
	pairs := make([]wal.KVPair, 0, len(ins)+len(upd)+len(del))
	for _, i := range ins {
		k := g.BankKey(i)
		pairs = append(pairs, wal.KVPair{Key: k, Value: bankValue(r, k)})
	}
	for _, i := range upd {
		k := g.BankKey(i)
		pairs = append(pairs, wal.KVPair{Key: k, Value: bankValue(r, k)})
	}
	for _, i := range del {
		pairs = append(pairs, wal.KVPair{Delete: true, Key: g.BankKey(i)})
	}
	return finish(pairs)
}

// ---- staking

// ValidatorKey returns the key of validator j.
func (g *Generator) ValidatorKey(j int) []byte {
	k := append(make([]byte, 0, 22), 0x21, 20)
	return g.appendHashBytes(k, idValidator, uint64(j), 1, 20)
}

func (g *Generator) validatorAddr(j int) []byte { return g.ValidatorKey(j)[2:] }

// DelegationKey returns the key of delegation entry i.
func (g *Generator) DelegationKey(i int) []byte {
	k := append(make([]byte, 0, 43), 0x31, 20)
	k = g.appendHashBytes(k, idDelegation, uint64(i), 1, 20)
	k = append(k, 20)
	val := int(g.hash(idDelegation, uint64(i)) % uint64(g.validators))
	return append(k, g.validatorAddr(val)...)
}

// randomRecord returns n bytes shaped like a protobuf record: a few
// printable fields and digits.
func randomRecord(r *rand.Rand, n int) []byte {
	v := make([]byte, n)
	for i := range v {
		switch {
		case i%32 == 0:
			v[i] = 0x0a + byte(i/32%6)*8
		case i%32 == 1:
			v[i] = byte(min(30, n-i-1))
		default:
			v[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[r.IntN(36)]
		}
	}
	return v
}

func (g *Generator) stakingPairs(v int64) []wal.KVPair {
	r := g.rng(idDelegation, v)
	ins, upd, del := g.changes(&g.delegation, idDelegation, v, r)
	pairs := make([]wal.KVPair, 0, len(ins)+len(upd)+len(del)+g.valUpdates)
	for _, i := range ins {
		pairs = append(pairs, wal.KVPair{Key: g.DelegationKey(i), Value: randomRecord(r, 100+r.IntN(151))})
	}
	for _, i := range upd {
		pairs = append(pairs, wal.KVPair{Key: g.DelegationKey(i), Value: randomRecord(r, 100+r.IntN(151))})
	}
	for _, i := range del {
		pairs = append(pairs, wal.KVPair{Delete: true, Key: g.DelegationKey(i)})
	}
	if v == 1 {
		for j := range g.validators {
			pairs = append(pairs, wal.KVPair{Key: g.ValidatorKey(j), Value: randomRecord(r, 300+r.IntN(101))})
		}
	} else {
		for range g.valUpdates {
			j := r.IntN(g.validators)
			pairs = append(pairs, wal.KVPair{Key: g.ValidatorKey(j), Value: randomRecord(r, 300+r.IntN(101))})
		}
	}
	return finish(pairs)
}

// ---- lockup

// LockRecordKey returns the record key of lock i: 0x02 | id.
func (g *Generator) LockRecordKey(i int) []byte {
	k := make([]byte, 9)
	k[0] = 0x02
	binary.BigEndian.PutUint64(k[1:], uint64(i)+1)
	return k
}

// LockIndexKey returns the end-time index key of lock i:
// 0x01 | end time | id.
func (g *Generator) LockIndexKey(i int) []byte {
	f := &g.lock
	born := f.born(i)
	life := f.life
	if i < f.genesis {
		life = g.death(f, idLock, i) - 1
	}
	// a lock's duration is a whole number of blocks plus a jitter, so the
	// index order follows the expiry order
	end := BlockTimeOf(born+life).UnixNano() + int64(g.hash(idLock, uint64(i))%uint64(BlockTime))
	k := make([]byte, 17)
	k[0] = 0x01
	binary.BigEndian.PutUint64(k[1:], uint64(end))
	binary.BigEndian.PutUint64(k[9:], uint64(i)+1)
	return k
}

func lockRecord(r *rand.Rand, id int, owner []byte) []byte {
	v := make([]byte, 0, 220)
	v = append(v, 0x08)
	v = binary.AppendUvarint(v, uint64(id)+1)
	v = append(v, 0x12, 43)
	v = append(v, "osmo1"...)
	for range 38 {
		v = append(v, "023456789acdefghjklmnpqrstuvwxyz"[owner[len(v)%len(owner)]%32])
	}
	v = append(v, 0x1a, 8)
	v = binary.BigEndian.AppendUint64(v, uint64(r.Int64N(1<<40)))
	v = append(v, 0x2a)
	coins := strconv.FormatInt(r.Int64N(1e15), 10) + "gamm/pool/" + strconv.Itoa(1+r.IntN(900))
	v = append(v, byte(len(coins)))
	v = append(v, coins...)
	return append(v, randomRecord(r, 200-len(v)+r.IntN(20)-10)...)
}

func (g *Generator) lockPairs(v int64) []wal.KVPair {
	r := g.rng(idLock, v)
	ins, upd, del := g.changes(&g.lock, idLock, v, r)
	pairs := make([]wal.KVPair, 0, 2*len(ins)+len(upd)+2*len(del))
	for _, i := range ins {
		owner := g.appendHashBytes(nil, idLock, uint64(i), 2, 20)
		id := g.LockIndexKey(i)
		pairs = append(pairs,
			wal.KVPair{Key: g.LockRecordKey(i), Value: lockRecord(r, i, owner)},
			wal.KVPair{Key: id, Value: id[9:]})
	}
	for _, i := range upd {
		owner := g.appendHashBytes(nil, idLock, uint64(i), 2, 20)
		pairs = append(pairs, wal.KVPair{Key: g.LockRecordKey(i), Value: lockRecord(r, i, owner)})
	}
	for _, i := range del {
		pairs = append(pairs,
			wal.KVPair{Delete: true, Key: g.LockRecordKey(i)},
			wal.KVPair{Delete: true, Key: g.LockIndexKey(i)})
	}
	return finish(pairs)
}
