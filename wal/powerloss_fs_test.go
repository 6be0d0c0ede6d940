package wal

// A power-loss model: a wrapper around memFS that remembers, per
// file, every version of its contents since its last Sync, and the directory
// operations since the last SyncDir, so that a crash image can be built in
// which each unsynced 4 KiB page independently holds any of the versions it
// had since the last fsync (its synced one, zeros past the synced end, or a
// later one), the file's size is any of the sizes it had since the last
// fsync, and any subset of the unsynced directory operations took effect.

import (
	"encoding/binary"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"sync"
)

type plDirOp struct {
	op       string // create, rename, remove
	name, to string
	n        *memNode
}

type plFS struct {
	m       *memFS
	mu      sync.Mutex
	hist    map[*memNode][][]byte // contents after each write/truncate since the last sync
	durable map[string]*memNode   // the directory as of the last SyncDir
	pending []plDirOp
	onOp    func(op, p string) // called with mu held, before each mutating op

	// for TestPowerLossModelFindsLoss: pretend directory fsyncs do nothing
	ignoreSyncDir bool
}

func newPLFS() *plFS {
	return &plFS{m: newMemFS(), hist: map[*memNode][][]byte{}, durable: map[string]*memNode{}}
}

type plFile struct {
	fs *plFS
	f  *memFile
}

func (p *plFS) before(op, name string) {
	if p.onOp != nil {
		p.onOp(op, name)
	}
}

func (p *plFS) MkdirAll(dir string) error { return p.m.MkdirAll(dir) }
func (p *plFS) ReadDir(dir string) ([]string, error) {
	return p.m.ReadDir(dir)
}

func (p *plFS) Create(name string) (file, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before("create", name)
	f, err := p.m.Create(name)
	if err != nil {
		return nil, err
	}
	mf := f.(*memFile)
	p.hist[mf.n] = nil
	p.pending = append(p.pending, plDirOp{op: "create", name: name, n: mf.n})
	return &plFile{p, mf}, nil
}

func (p *plFS) OpenFile(name string, ro bool) (file, error) {
	f, err := p.m.OpenFile(name, ro)
	if err != nil {
		return nil, err
	}
	return &plFile{p, f.(*memFile)}, nil
}

func (p *plFS) Rename(o, n string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before("rename", n)
	p.m.mu.Lock()
	node := p.m.files[o]
	p.m.mu.Unlock()
	if err := p.m.Rename(o, n); err != nil {
		return err
	}
	p.pending = append(p.pending, plDirOp{op: "rename", name: o, to: n, n: node})
	return nil
}

func (p *plFS) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before("remove", name)
	if err := p.m.Remove(name); err != nil {
		return err
	}
	p.pending = append(p.pending, plDirOp{op: "remove", name: name})
	return nil
}

func (p *plFS) SyncDir(dir string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before("syncdir", dir)
	if err := p.m.SyncDir(dir); err != nil {
		return err
	}
	dir = path.Clean(dir)
	if dir != memDir || p.ignoreSyncDir {
		return nil
	}
	p.durable = map[string]*memNode{}
	p.m.mu.Lock()
	for name, n := range p.m.files {
		if path.Dir(name) == dir {
			p.durable[name] = n
		}
	}
	p.m.mu.Unlock()
	p.pending = nil
	return nil
}

func (f *plFile) ReadAt(b []byte, off int64) (int, error) { return f.f.ReadAt(b, off) }
func (f *plFile) Close() error                            { return f.f.Close() }
func (f *plFile) Size() (int64, error)                    { return f.f.Size() }

func (f *plFile) record() {
	f.fs.m.mu.Lock()
	d := slices.Clone(f.f.n.data)
	f.fs.m.mu.Unlock()
	f.fs.hist[f.f.n] = append(f.fs.hist[f.f.n], d)
}

func (f *plFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.before("write", f.f.path)
	n, err := f.f.WriteAt(b, off)
	f.record()
	return n, err
}

func (f *plFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.before("truncate", f.f.path)
	err := f.f.Truncate(size)
	f.record()
	return err
}

func (f *plFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.before("sync", f.f.path)
	err := f.f.Sync()
	if err == nil {
		f.fs.hist[f.f.n] = nil
	}
	return err
}

// plNodeState is what a crash may make of one file: its synced contents and
// the versions it had since.
type plNodeState struct {
	synced   []byte
	versions [][]byte
}

func (s *plNodeState) latest() []byte {
	if len(s.versions) > 0 {
		return s.versions[len(s.versions)-1]
	}
	return s.synced
}

// plState is a frozen crash point.
type plState struct {
	durable map[string]*plNodeState
	pending []plDirOp // n replaced by key into nodes
	nodes   map[*memNode]*plNodeState
	label   string
}

// snapshot freezes the current state; mu must be held.
func (p *plFS) snapshotLocked(label string) *plState {
	st := &plState{durable: map[string]*plNodeState{}, nodes: map[*memNode]*plNodeState{}, label: label}
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	get := func(n *memNode) *plNodeState {
		if n == nil {
			return nil
		}
		if s, ok := st.nodes[n]; ok {
			return s
		}
		s := &plNodeState{synced: slices.Clone(n.synced)}
		s.versions = append(s.versions, p.hist[n]...) // versions are never mutated
		st.nodes[n] = s
		return s
	}
	for name, n := range p.durable {
		st.durable[name] = get(n)
	}
	for _, op := range p.pending {
		get(op.n)
		st.pending = append(st.pending, op)
	}
	return st
}

// plImage is one crash image: file name to contents, and a description.
type plImage struct {
	files map[string][]byte
	nodes map[string]*plNodeState
	desc  string
}

// namespace applies the chosen subset of pending directory ops.
func (st *plState) namespace(mask uint64) map[string]*plNodeState {
	ns := map[string]*plNodeState{}
	for k, v := range st.durable {
		ns[k] = v
	}
	for i, op := range st.pending {
		if mask&(1<<i) == 0 {
			continue
		}
		switch op.op {
		case "create":
			ns[op.name] = st.nodes[op.n]
		case "rename":
			if n, ok := ns[op.name]; ok {
				delete(ns, op.name)
				ns[op.to] = n
			}
		case "remove":
			delete(ns, op.name)
		}
	}
	return ns
}

// choices of one file: sizes and, per page, distinct page contents.
type plChoices struct {
	sizes []int
	pages [][][]byte // pages[p] = distinct options (each unwrittenPage long, zero padded)
}

func pageOf(d []byte, p int) []byte {
	b := make([]byte, unwrittenPage)
	if p*unwrittenPage < len(d) {
		copy(b, d[p*unwrittenPage:])
	}
	return b
}

func (s *plNodeState) choices() plChoices {
	all := append([][]byte{s.synced}, s.versions...)
	var c plChoices
	maxLen := 0
	for _, v := range all {
		if !slices.Contains(c.sizes, len(v)) {
			c.sizes = append(c.sizes, len(v))
		}
		maxLen = max(maxLen, len(v))
	}
	sort.Ints(c.sizes)
	for p := 0; p*unwrittenPage < maxLen; p++ {
		var opts [][]byte
		for _, v := range all {
			pg := pageOf(v, p)
			if !slices.ContainsFunc(opts, func(o []byte) bool { return string(o) == string(pg) }) {
				opts = append(opts, pg)
			}
		}
		c.pages = append(c.pages, opts)
	}
	return c
}

func (c plChoices) build(size int, pick []int) []byte {
	out := make([]byte, 0, size)
	for p := 0; p*unwrittenPage < size; p++ {
		out = append(out, c.pages[p][pick[p]]...)
	}
	return out[:size]
}

// images returns up to limit crash images of st (all when there are no
// more; a random sample otherwise, always with the all-old and all-new
// extremes).
func (st *plState) images(rng *rand.Rand, limit int) []plImage {
	nPend := len(st.pending)
	if nPend > 6 {
		nPend = 6 // not expected
	}
	var out []plImage
	masks := 1 << nPend
	per := max(1, limit/masks)
	for mask := 0; mask < masks; mask++ {
		ns := st.namespace(uint64(mask))
		names := make([]string, 0, len(ns))
		for n := range ns {
			names = append(names, n)
		}
		sort.Strings(names)
		type fc struct {
			name string
			c    plChoices
		}
		var fcs []fc
		total := 1.0
		for _, n := range names {
			c := ns[n].choices()
			fcs = append(fcs, fc{n, c})
			total *= float64(len(c.sizes))
			for _, p := range c.pages {
				total *= float64(len(p))
			}
		}
		// a file's dimensions: size index, then page picks
		var dims []int
		for _, f := range fcs {
			dims = append(dims, len(f.c.sizes))
			for _, p := range f.c.pages {
				dims = append(dims, len(p))
			}
		}
		mk := func(idx []int, desc string) plImage {
			img := plImage{files: map[string][]byte{}, nodes: map[string]*plNodeState{}, desc: desc}
			k := 0
			for _, f := range fcs {
				size := f.c.sizes[idx[k]]
				k++
				pick := idx[k : k+len(f.c.pages)]
				k += len(f.c.pages)
				img.files[f.name] = f.c.build(size, pick)
				img.nodes[f.name] = ns[f.name]
			}
			return img
		}
		describe := func(idx []int) string {
			s := "dirmask=" + itoa(mask)
			k := 0
			for _, f := range fcs {
				s += " " + path.Base(f.name) + ":size=" + itoa(f.c.sizes[idx[k]]) + "/" + itoa(len(f.c.sizes))
				k++
				s += " pages="
				for p := range f.c.pages {
					s += itoa(idx[k])
					k++
					_ = p
				}
			}
			return s
		}
		if total <= float64(per) {
			idx := make([]int, len(dims))
			for {
				out = append(out, mk(slices.Clone(idx), describe(idx)))
				i := 0
				for ; i < len(dims); i++ {
					idx[i]++
					if idx[i] < dims[i] {
						break
					}
					idx[i] = 0
				}
				if i == len(dims) {
					break
				}
			}
			continue
		}
		lo := make([]int, len(dims))
		hi := make([]int, len(dims))
		for i, d := range dims {
			hi[i] = d - 1
		}
		out = append(out, mk(lo, describe(lo)), mk(hi, describe(hi)))
		for range per - 2 {
			idx := make([]int, len(dims))
			for i, d := range dims {
				idx[i] = rng.IntN(d)
			}
			out = append(out, mk(idx, describe(idx)))
		}
	}
	return out
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b []byte
	for i > 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	if neg {
		b = append([]byte{'-'}, b...)
	}
	return string(b)
}

// imageFS returns a memFS holding img as durable.
func imageFS(img plImage) *memFS {
	fs := newMemFS()
	fs.dirs[memDir] = true
	for name, d := range img.files {
		fs.put(name, d)
	}
	return fs
}

// plRecords parses the well-formed records of a segment's contents: their
// start offsets and versions, stopping at the first bad frame.
func plRecords(d []byte) (offs []int64, vers []int64) {
	off := int64(segmentHeaderSize)
	for off+frameHeaderSize <= int64(len(d)) {
		h, ok := parseFrameHeader(d[off : off+frameHeaderSize])
		if !ok {
			break
		}
		end := off + frameHeaderSize + int64(h.n)
		if end > int64(len(d)) {
			break
		}
		body := d[off+frameHeaderSize : end]
		if crc32c(body) != h.bcrc {
			break
		}
		offs = append(offs, off)
		vers = append(vers, int64(binary.LittleEndian.Uint64(body)))
		off = end
	}
	return offs, vers
}

// syncedLast returns the highest version whose record is whole in the
// synced contents of a file with a durable name.
func (st *plState) syncedLast() int64 {
	var last int64
	for name, s := range st.durable {
		if _, ok := parseSegmentName(path.Base(name)); !ok {
			continue
		}
		_, vers := plRecords(s.synced)
		if len(vers) > 0 {
			last = max(last, vers[len(vers)-1])
		}
	}
	return last
}

// newPLFSFrom returns a plFS whose durable state is img.
func newPLFSFrom(img plImage) *plFS {
	p := newPLFS()
	p.m.dirs[memDir] = true
	for name, d := range img.files {
		p.m.put(name, d)
		p.m.mu.Lock()
		p.durable[name] = p.m.files[name]
		p.m.mu.Unlock()
	}
	return p
}
