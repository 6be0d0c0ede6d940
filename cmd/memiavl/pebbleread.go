package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble"
	dbm "github.com/cosmos/cosmos-db"
)

// errReadOnly is returned by the writes of a database opened read-only.
var errReadOnly = errors.New("the application database is opened read-only")

// readOnlyPebble is a pebble database opened read-only (nothing in its
// directory is created or changed, but for the modification time of its
// empty LOCK file, which pebble's lock opens with os.Create; a missing
// database is an error, not a new one), behind the dbm.DB interface that cosmos-db's own pebble
// backend, which always opens for writing, offers. Writes fail.
type readOnlyPebble struct {
	db *pebble.DB
}

var _ dbm.DB = (*readOnlyPebble)(nil)

func openReadOnlyPebble(path string) (*readOnlyPebble, error) {
	// even read-only, pebble creates its lock file in the directory it
	// opens: a directory that holds no database is refused first
	if _, err := os.Stat(filepath.Join(path, "CURRENT")); err != nil {
		return nil, fmt.Errorf("%s holds no pebble database: %w", path, err)
	}
	// pebble keeps OPTIONS-<n> files, which goleveldb does not. pebble
	// reads a goleveldb database's log, so without this a goleveldb
	// database would open, and pebble's lock (fcntl) does not see a
	// running goleveldb node's (flock): its live files would be read.
	if !hasPebbleOptions(path) {
		return nil, fmt.Errorf("%s holds no pebble database (no OPTIONS file; it looks like a goleveldb database: try --backend goleveldb)", path)
	}
	db, err := pebble.Open(path, &pebble.Options{ReadOnly: true, ErrorIfNotExists: true, Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	return &readOnlyPebble{db: db}, nil
}

// hasPebbleOptions reports whether dir holds one of the OPTIONS-<n> files
// pebble keeps and goleveldb does not. It lists dir rather than globbing,
// which would read metacharacters in dir's own path as a pattern.
func hasPebbleOptions(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "OPTIONS-") && !e.IsDir() {
			return true
		}
	}
	return false
}

func (p *readOnlyPebble) Get(key []byte) ([]byte, error) {
	if len(key) == 0 {
		return nil, errors.New("key cannot be empty")
	}
	v, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

func (p *readOnlyPebble) Has(key []byte) (bool, error) {
	v, err := p.Get(key)
	return v != nil, err
}

func (p *readOnlyPebble) Set([]byte, []byte) error     { return errReadOnly }
func (p *readOnlyPebble) SetSync([]byte, []byte) error { return errReadOnly }
func (p *readOnlyPebble) Delete([]byte) error          { return errReadOnly }
func (p *readOnlyPebble) DeleteSync([]byte) error      { return errReadOnly }
func (p *readOnlyPebble) NewBatch() dbm.Batch          { return readOnlyBatch{} }
func (p *readOnlyPebble) NewBatchWithSize(int) dbm.Batch {
	return readOnlyBatch{}
}
func (p *readOnlyPebble) Print() error             { return nil }
func (p *readOnlyPebble) Stats() map[string]string { return map[string]string{} }
func (p *readOnlyPebble) Close() error             { return p.db.Close() }

func (p *readOnlyPebble) Iterator(start, end []byte) (dbm.Iterator, error) {
	return p.iterator(start, end, false)
}

func (p *readOnlyPebble) ReverseIterator(start, end []byte) (dbm.Iterator, error) {
	return p.iterator(start, end, true)
}

func (p *readOnlyPebble) iterator(start, end []byte, reverse bool) (dbm.Iterator, error) {
	if (start != nil && len(start) == 0) || (end != nil && len(end) == 0) {
		return nil, errors.New("key cannot be empty")
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, fmt.Errorf("pebble iterator: %w", err)
	}
	if reverse {
		it.Last()
	} else {
		it.First()
	}
	return &readOnlyPebbleIterator{it: it, start: start, end: end, reverse: reverse}, nil
}

// quietLogger drops pebble's informational messages (its recovery of the
// log on open, for one); a fatal one still stops the process, as pebble's
// own logger does.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}

// readOnlyBatch is the batch of a read-only database: every write fails.
type readOnlyBatch struct{}

func (readOnlyBatch) Set([]byte, []byte) error  { return errReadOnly }
func (readOnlyBatch) Delete([]byte) error       { return errReadOnly }
func (readOnlyBatch) Write() error              { return errReadOnly }
func (readOnlyBatch) WriteSync() error          { return errReadOnly }
func (readOnlyBatch) Close() error              { return nil }
func (readOnlyBatch) GetByteSize() (int, error) { return 0, nil }

type readOnlyPebbleIterator struct {
	it         *pebble.Iterator
	start, end []byte
	reverse    bool
}

func (i *readOnlyPebbleIterator) Domain() ([]byte, []byte) { return i.start, i.end }
func (i *readOnlyPebbleIterator) Valid() bool              { return i.it.Valid() }
func (i *readOnlyPebbleIterator) Error() error             { return i.it.Error() }
func (i *readOnlyPebbleIterator) Close() error             { return i.it.Close() }

func (i *readOnlyPebbleIterator) Next() {
	if !i.it.Valid() {
		panic("iterator is invalid")
	}
	if i.reverse {
		i.it.Prev()
	} else {
		i.it.Next()
	}
}

func (i *readOnlyPebbleIterator) Key() []byte {
	if !i.it.Valid() {
		panic("iterator is invalid")
	}
	return append([]byte{}, i.it.Key()...)
}

func (i *readOnlyPebbleIterator) Value() []byte {
	if !i.it.Valid() {
		panic("iterator is invalid")
	}
	return append([]byte{}, i.it.Value()...)
}
