package wal

import (
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"sync"
)

// memFS is an in-memory fileSystem for tests. It models what survives a
// machine crash the way POSIX promises it: a file's data survives up to its
// last Sync, and a directory entry (creation, rename, removal) survives
// once the directory is synced. It can also fail or tear operations.
type memFS struct {
	mu      sync.Mutex
	files   map[string]*memNode // the namespace as the running program sees it
	durable map[string]*memNode // the namespace as of the last SyncDir
	dirs    map[string]bool

	ops     int // mutating operations performed
	crashAt int // > 0: the crashAt-th mutating op is the last one to take effect (a write is torn in half); later ones fail
	crashed bool

	// hook, if set, runs before each mutating op (outside mu); an error
	// fails the op without effect.
	hook func(op, path string) error
}

type memNode struct {
	data   []byte // current contents
	synced []byte // contents as of the last Sync
}

var errCrashed = errors.New("memfs: machine crashed")

func newMemFS() *memFS {
	return &memFS{files: map[string]*memNode{}, durable: map[string]*memNode{}, dirs: map[string]bool{}}
}

// crash returns the file system a reboot would find: only synced data under
// durable names.
func (m *memFS) crash() *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := newMemFS()
	for name, node := range m.durable {
		d := slices.Clone(node.synced)
		if d == nil {
			d = []byte{}
		}
		nn := &memNode{data: d, synced: slices.Clone(d)}
		n.files[name] = nn
		n.durable[name] = nn
	}
	for d := range m.dirs {
		n.dirs[d] = true
	}
	return n
}

// clone returns a copy of the current state (what a process crash leaves),
// with everything treated as durable.
func (m *memFS) clone() *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := newMemFS()
	for name, node := range m.files {
		nn := &memNode{data: slices.Clone(node.data), synced: slices.Clone(node.data)}
		n.files[name] = nn
		n.durable[name] = nn
	}
	for d := range m.dirs {
		n.dirs[d] = true
	}
	return n
}

func (m *memFS) get(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.files[name]; ok {
		return slices.Clone(n.data)
	}
	return nil
}

func (m *memFS) put(name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := &memNode{data: slices.Clone(data), synced: slices.Clone(data)}
	m.files[name] = n
	m.durable[name] = n
	m.dirs[path.Dir(name)] = true
}

// names returns the sorted names of the files in dir.
func (m *memFS) names(dir string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.files {
		if path.Dir(name) == dir {
			out = append(out, path.Base(name))
		}
	}
	sort.Strings(out)
	return out
}

// isSynced reports whether every file's data is synced.
func (m *memFS) allSynced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.files {
		if string(n.data) != string(n.synced) {
			return false
		}
	}
	return true
}

func (m *memFS) setHook(h func(op, path string) error) {
	m.mu.Lock()
	m.hook = h
	m.mu.Unlock()
}

// begin accounts for a mutating op. torn reports that the op is the crash
// point (a write then takes effect only in part).
func (m *memFS) begin(op, p string) (torn bool, err error) {
	m.mu.Lock()
	h := m.hook
	m.mu.Unlock()
	if h != nil {
		if err := h(op, p); err != nil {
			return false, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return false, errCrashed
	}
	m.ops++
	if m.crashAt > 0 && m.ops >= m.crashAt {
		m.crashed = true
		return true, nil
	}
	return false, nil
}

func (m *memFS) MkdirAll(dir string) error {
	if _, err := m.begin("mkdir", dir); err != nil {
		return err
	}
	m.mu.Lock()
	m.dirs[path.Clean(dir)] = true
	m.mu.Unlock()
	return nil
}

func (m *memFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	ok := m.dirs[path.Clean(dir)]
	m.mu.Unlock()
	if !ok {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: os.ErrNotExist}
	}
	return m.names(path.Clean(dir)), nil
}

func (m *memFS) Create(p string) (file, error) {
	if _, err := m.begin("create", p); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[path.Dir(p)] {
		return nil, &os.PathError{Op: "create", Path: p, Err: os.ErrNotExist}
	}
	n := &memNode{data: []byte{}}
	m.files[p] = n
	return &memFile{fs: m, n: n, path: p}, nil
}

func (m *memFS) OpenFile(p string, readOnly bool) (file, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[p]
	if !ok {
		return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrNotExist}
	}
	return &memFile{fs: m, n: n, path: p, ro: readOnly}, nil
}

func (m *memFS) Rename(oldPath, newPath string) error {
	if _, err := m.begin("rename", newPath); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[oldPath]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldPath, Err: os.ErrNotExist}
	}
	delete(m.files, oldPath)
	m.files[newPath] = n
	return nil
}

func (m *memFS) Remove(p string) error {
	if _, err := m.begin("remove", p); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[p]; !ok {
		return &os.PathError{Op: "remove", Path: p, Err: os.ErrNotExist}
	}
	delete(m.files, p)
	return nil
}

func (m *memFS) SyncDir(dir string) error {
	if _, err := m.begin("syncdir", dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = path.Clean(dir)
	for name := range m.durable {
		if path.Dir(name) == dir {
			delete(m.durable, name)
		}
	}
	for name, n := range m.files {
		if path.Dir(name) == dir {
			m.durable[name] = n
		}
	}
	return nil
}

type memFile struct {
	fs     *memFS
	n      *memNode
	path   string
	ro     bool
	closed bool
}

var errClosedFile = errors.New("memfs: file closed")

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, errClosedFile
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.n.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(b []byte, off int64) (int, error) {
	if f.ro {
		return 0, os.ErrPermission
	}
	torn, err := f.fs.begin("write", f.path)
	if err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, errClosedFile
	}
	if torn {
		b = b[:len(b)/2]
	}
	if end := off + int64(len(b)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], b)
	if torn {
		return len(b), errCrashed
	}
	return len(b), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return errClosedFile
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	if _, err := f.fs.begin("sync", f.path); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if f.ro {
		return os.ErrPermission
	}
	if _, err := f.fs.begin("truncate", f.path); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if size < int64(len(f.n.data)) {
		f.n.data = f.n.data[:size:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.n.data)), nil
}

// memDir is the directory tests open their in-memory logs in.
const memDir = "/wal"

func memPath(base int64) string { return memDir + "/" + segmentName(base) }
