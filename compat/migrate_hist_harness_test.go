package compat_test

// A scripted chain history run on rootmulti over cosmos/iavl (the oracle),
// imported with compat.ImportIAVL at chosen heights and continued on our
// multistore with the same next blocks.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// histStep is one block of a script; with reload the multistore is
// reloaded before the block with mount and up (the first step must reload).
type histStep struct {
	reload bool
	mount  []string
	up     *storetypes.StoreUpgrades
	quiet  []string // mounted stores not written in this block
	clear  []string // stores emptied in this block

	css []wal.ChangeSet // filled by the first run
}

type histScript struct {
	seed    int64
	initial int64 // SetInitialVersion on the first load (0: none)
	pruning *pruningtypes.PruningOptions
	steps   []histStep
}

// histChain is the oracle run of a script.
type histChain struct {
	db     dbm.DB
	rs     *rootmulti.Store
	keys   keyring
	infos  map[int64]*storetypes.CommitInfo
	ids    []storetypes.CommitID // per step
	models map[int64]map[string]map[string]string
	mounts [][]string // mounted IAVL stores per step

	queries bool // histContinue compares queries at the heights it reaches
}

func histHeight(s *histScript, step int) int64 {
	if s.initial > 1 {
		return s.initial + int64(step)
	}
	return int64(step) + 1
}

func histStepOf(s *histScript, h int64) int {
	if s.initial > 1 {
		return int(h - s.initial)
	}
	return int(h - 1)
}

func histMount(cms storetypes.CommitMultiStore, keys keyring, names []string) {
	mountAll(cms, keys, mount{iavl: names, transient: "tstore", memory: "mstore"})
}

func histLoadRM(t *testing.T, db dbm.DB, keys keyring, s *histScript, names []string, up *storetypes.StoreUpgrades) *rootmulti.Store {
	t.Helper()
	rs := rootmulti.NewStore(db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	if s.pruning != nil {
		rs.SetPruning(*s.pruning)
	} else {
		rs.SetPruning(pruningtypes.NewPruningOptions(pruningtypes.PruningNothing))
	}
	histMount(rs, keys, names)
	var err error
	if up != nil {
		err = rs.LoadLatestVersionAndUpgrade(up)
	} else {
		err = rs.LoadLatestVersion()
	}
	if err != nil {
		t.Fatalf("rootmulti load: %v", err)
	}
	return rs
}

func histClone(m map[string]map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for n, kv := range m {
		c := map[string]string{}
		for k, v := range kv {
			c[k] = v
		}
		out[n] = c
	}
	return out
}

// histBuild runs the script on rootmulti over db, generating the
// blocks' writes.
func histBuild(t *testing.T, db dbm.DB, s *histScript) *histChain {
	t.Helper()
	c := &histChain{db: db, keys: keyring{}, infos: map[int64]*storetypes.CommitInfo{}, models: map[int64]map[string]map[string]string{}}
	histBuildFrom(t, c, s, 0)
	return c
}

// histBuildFrom runs the steps of s from step from on (c holds the
// chain's first from steps: the model, mounts and ids).
func histBuildFrom(t *testing.T, c *histChain, s *histScript, from int) {
	t.Helper()
	r := rand.New(rand.NewSource(s.seed + int64(from)))
	model := map[string]map[string]string{}
	var mounted []string
	c.ids, c.mounts = c.ids[:from], c.mounts[:from]
	if from > 0 {
		model = histClone(c.models[histHeight(s, from-1)])
		mounted = c.mounts[from-1]
	}
	for i := from; i < len(s.steps); i++ {
		st := &s.steps[i]
		if st.reload {
			mounted = st.mount
			c.rs = histLoadRM(t, c.db, c.keys, s, mounted, st.up)
			if i == 0 && s.initial > 0 {
				if err := c.rs.SetInitialVersion(s.initial); err != nil {
					t.Fatal(err)
				}
			}
			if st.up != nil {
				for _, rn := range st.up.Renamed {
					model[rn.NewKey] = model[rn.OldKey]
					delete(model, rn.OldKey)
				}
				for _, d := range st.up.Deleted {
					delete(model, d)
				}
			}
			for _, n := range mounted {
				if model[n] == nil {
					model[n] = map[string]string{}
				}
			}
			for n := range model {
				found := false
				for _, m := range mounted {
					found = found || m == n
				}
				if !found {
					delete(model, n)
				}
			}
		}
		c.mounts = append(c.mounts, mounted)
		if st.css == nil {
			for _, name := range mounted {
				skip := false
				for _, q := range st.quiet {
					skip = skip || q == name
				}
				cs := wal.ChangeSet{Name: name}
				for _, cl := range st.clear {
					if cl == name {
						var ks []string
						for k := range model[name] {
							ks = append(ks, k)
						}
						sort.Strings(ks)
						for _, k := range ks {
							cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: []byte(k)})
						}
						skip = true
					}
				}
				if !skip && r.Intn(5) != 0 {
					var ks []string
					for k := range model[name] {
						ks = append(ks, k)
					}
					sort.Strings(ks)
					for j := 0; j < 1+r.Intn(12); j++ {
						if len(ks) > 0 && r.Intn(4) == 0 {
							cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: []byte(ks[r.Intn(len(ks))])})
							continue
						}
						var k []byte
						if len(ks) > 0 && r.Intn(3) == 0 {
							k = []byte(ks[r.Intn(len(ks))])
						} else {
							k = []byte(fmt.Sprintf("k%03d", r.Intn(400)))
						}
						cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: []byte(fmt.Sprintf("v%d-%d", i, r.Intn(1000)))})
					}
				}
				if len(cs.Pairs) > 0 {
					st.css = append(st.css, cs)
				}
			}
			if st.css == nil {
				st.css = []wal.ChangeSet{}
			}
		}
		for _, cs := range st.css {
			for _, p := range cs.Pairs {
				if p.Delete {
					delete(model[cs.Name], string(p.Key))
				} else {
					model[cs.Name][string(p.Key)] = string(p.Value)
				}
			}
		}
		id := histBlock(c.rs, c.keys, st.css, i)
		if want := histHeight(s, i); id.Version != want {
			t.Fatalf("rootmulti step %d committed version %d, want %d", i, id.Version, want)
		}
		c.ids = append(c.ids, id)
		info, err := c.rs.GetCommitInfo(id.Version)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(info.Hash(), id.Hash) {
			t.Fatalf("rootmulti commit info of %d does not hash to its app hash", id.Version)
		}
		c.infos[id.Version] = info
		c.models[id.Version] = histClone(model)
		// the harness's model must name the stores of the commit info
		var names, mnames []string
		for _, si := range info.StoreInfos {
			names = append(names, si.Name)
		}
		for n := range model {
			mnames = append(mnames, n)
		}
		sort.Strings(names)
		sort.Strings(mnames)
		if fmt.Sprint(names) != fmt.Sprint(mnames) {
			t.Fatalf("harness: commit info of %d has stores %v, model %v", id.Version, names, mnames)
		}
	}
}

// histBlock writes css (and the transient and memory stores) and commits.
func histBlock(cms storetypes.CommitMultiStore, keys keyring, css []wal.ChangeSet, i int) storetypes.CommitID {
	for _, cs := range css {
		st := cms.GetKVStore(keys[cs.Name])
		for _, p := range cs.Pairs {
			if p.Delete {
				st.Delete(p.Key)
			} else {
				st.Set(p.Key, p.Value)
			}
		}
	}
	cms.GetKVStore(keys["tstore"]).Set([]byte("t"), []byte(fmt.Sprint(i)))
	cms.GetKVStore(keys["mstore"]).Set([]byte(fmt.Sprint("m", i)), []byte(fmt.Sprint(i)))
	return cms.Commit()
}

// histVerify checks the database in dir against the oracle at h.
func histVerify(t *testing.T, c *histChain, h int64, dir string) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("height %d: open the import: %v", h, err)
	}
	defer db.Close()
	info := c.infos[h]
	if db.Version() != h {
		t.Fatalf("height %d: imported version %d", h, db.Version())
	}
	if got := db.LastCommitInfo().Hash(); !bytes.Equal(got, info.Hash()) {
		t.Fatalf("height %d: imported app hash %X, rootmulti %X", h, got, info.Hash())
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	var names []string
	for _, si := range info.StoreInfos {
		names = append(names, si.Name)
		tr := view.Tree(si.Name)
		if tr == nil {
			t.Fatalf("height %d: store %s not imported", h, si.Name)
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("height %d: store %s: %v", h, si.Name, err)
		}
		if !bytes.Equal(tr.RootHash(), si.CommitId.Hash) {
			t.Fatalf("height %d: store %s root %X, rootmulti %X", h, si.Name, tr.RootHash(), si.CommitId.Hash)
		}
		want := c.models[h][si.Name]
		n := 0
		for it := tr.Iterator(nil, nil, true); it.Valid(); it.Next() {
			n++
			if v, ok := want[string(it.Key())]; !ok || v != string(it.Value()) {
				t.Fatalf("height %d: store %s: key %q = %q, want %q (present %v)", h, si.Name, it.Key(), it.Value(), v, ok)
			}
		}
		if n != len(want) {
			t.Fatalf("height %d: store %s has %d keys, want %d", h, si.Name, n, len(want))
		}
	}
	sort.Strings(names)
	if fmt.Sprint(view.StoreNames()) != fmt.Sprint(names) {
		t.Fatalf("height %d: stores %v, rootmulti %v", h, view.StoreNames(), names)
	}
}

// histImport imports every store at h into a new directory and checks
// it against the oracle; it returns the directory.
func histImport(t *testing.T, c *histChain, h int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memiavl.db")
	if err := compat.ImportIAVL(c.db, h, nil, dir, multitree.Options{RewriteConcurrency: 2}); err != nil {
		t.Fatalf("import at %d: %v", h, err)
	}
	histVerify(t, c, h, dir)
	return dir
}

// histContinue opens our multistore on the import at h and commits the
// script's next blocks, which must give rootmulti's app hashes.
func histContinue(t *testing.T, c *histChain, s *histScript, h int64, dir string) {
	t.Helper()
	keys := keyring{}
	first := histStepOf(s, h) + 1
	var ms *compat.MultiStore
	open := func(names []string, up *storetypes.StoreUpgrades) {
		if ms != nil {
			if err := ms.Close(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		ms, err = compat.NewMultiStore(dir, log.NewNopLogger(), testConfig())
		if err != nil {
			t.Fatal(err)
		}
		histMount(ms, keys, names)
		if up != nil {
			err = ms.LoadLatestVersionAndUpgrade(up)
		} else {
			err = ms.LoadLatestVersion()
		}
		if err != nil {
			t.Fatalf("import at %d: our load before step %d: %v", h, first, err)
		}
	}
	defer func() {
		if ms != nil {
			ms.Close()
		}
	}()
	if first >= len(s.steps) {
		open(c.mounts[len(c.mounts)-1], nil)
		if id := ms.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, c.infos[h].Hash()) {
			t.Fatalf("import at %d: LastCommitID %v", h, id)
		}
		return
	}
	for i := first; i < len(s.steps); i++ {
		st := s.steps[i]
		switch {
		case st.reload:
			open(st.mount, st.up)
		case i == first:
			open(c.mounts[i], nil)
		}
		if i == first {
			if id := ms.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, c.infos[h].Hash()) {
				t.Fatalf("import at %d: LastCommitID %v, want %X", h, id, c.infos[h].Hash())
			}
		}
		id := histBlock(ms, keys, st.css, i)
		if id.Version != c.ids[i].Version || !bytes.Equal(id.Hash, c.ids[i].Hash) {
			t.Fatalf("import at %d: block %d: ours %d %X, rootmulti %d %X", h, i, id.Version, id.Hash, c.ids[i].Version, c.ids[i].Hash)
		}
	}
	if c.queries {
		last := histHeight(s, len(s.steps)-1)
		for v := h; v <= last; v++ {
			histSameQueries(t, c, ms, v)
		}
	}
}

// histSameQueries compares proven /key queries at v, and reads of
// CacheMultiStoreWithVersion(v), on ours and rootmulti (which must keep v),
// for the stores of v mounted on both.
func histSameQueries(t *testing.T, c *histChain, ms *compat.MultiStore, v int64) {
	t.Helper()
	rkeys := c.rs.StoreKeysByName()
	okeys := ms.StoreKeysByName()
	cms, err := ms.CacheMultiStoreWithVersion(v)
	if err != nil {
		t.Fatalf("our CacheMultiStoreWithVersion(%d): %v", v, err)
	}
	for _, si := range c.infos[v].StoreInfos {
		if rkeys[si.Name] == nil || okeys[si.Name] == nil {
			continue
		}
		var ks []string
		for k := range c.models[v][si.Name] {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		if len(ks) > 3 {
			ks = []string{ks[0], ks[len(ks)/2], ks[len(ks)-1]}
		}
		ks = append(ks, "k-absent", "zzz")
		for _, k := range ks {
			req := func() *storetypes.RequestQuery {
				return &storetypes.RequestQuery{Path: "/" + si.Name + "/key", Data: []byte(k), Height: v, Prove: true}
			}
			ours, oerr := ms.Query(req())
			theirs, terr := c.rs.Query(req())
			if err := sameResponse(ours, oerr, theirs, terr); err != nil {
				t.Fatalf("query %s %q at %d: %v", si.Name, k, v, err)
			}
			got := cms.GetKVStore(okeys[si.Name]).Get([]byte(k))
			if want, ok := c.models[v][si.Name][k]; ok != (got != nil) || string(got) != want {
				t.Fatalf("historical read %s %q at %d: %q, want %q", si.Name, k, v, got, want)
			}
		}
	}
}

func histIsMigrate(err error) bool { return errors.Is(err, compat.ErrMigrate) }

// histReadOnly is a database that fails every write.
type histReadOnly struct{ dbm.DB }

var errHistWrite = errors.New("the import wrote to the application database")

func (histReadOnly) Set([]byte, []byte) error     { return errHistWrite }
func (histReadOnly) SetSync([]byte, []byte) error { return errHistWrite }
func (histReadOnly) Delete([]byte) error          { return errHistWrite }
func (histReadOnly) DeleteSync([]byte) error      { return errHistWrite }
func (d histReadOnly) NewBatch() dbm.Batch        { return histROBatch{d.DB.NewBatch()} }
func (d histReadOnly) NewBatchWithSize(n int) dbm.Batch {
	return histROBatch{d.DB.NewBatchWithSize(n)}
}

// histROBatch is a batch that fails to write.
type histROBatch struct{ dbm.Batch }

func (histROBatch) Write() error     { return errHistWrite }
func (histROBatch) WriteSync() error { return errHistWrite }
