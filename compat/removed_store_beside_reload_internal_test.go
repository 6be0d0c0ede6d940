package compat

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/types"
)

// removedStoreMultistore returns a loaded multistore with stores a and b
// holding x=v<h> at versions 1 to 3, loaded again with an upgrade that
// deletes b: b is answered for (emptied) until the next Commit.
func removedStoreMultistore(t *testing.T) (*MultiStore, types.StoreKey) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Enable = true
	ms, err := NewMultiStore(t.TempDir(), log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := types.NewKVStoreKey("a"), types.NewKVStoreKey("b")
	ms.MountStoreWithDB(a, types.StoreTypeIAVL, nil)
	ms.MountStoreWithDB(b, types.StoreTypeIAVL, nil)
	if err := ms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		ms.GetKVStore(a).Set([]byte("x"), []byte(fmt.Sprintf("v%d", i)))
		ms.GetKVStore(b).Set([]byte("x"), []byte(fmt.Sprintf("v%d", i)))
		ms.Commit()
	}
	if err := ms.LoadLatestVersionAndUpgrade(&types.StoreUpgrades{Deleted: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	return ms, b
}

// waitBlockedIn waits until some goroutine is blocked on a mutex in the
// function fn (a frame of its stack), and fails if done reports first.
func waitBlockedIn(t *testing.T, fn string, done <-chan error) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "sync.(*Mutex).Lock") && strings.Contains(g, fn) {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("ended before it waited in %s: %v", fn, err)
		default:
			runtime.Gosched()
		}
	}
}

// blockedIn reports (closes the channel) when some goroutine is blocked on
// a mutex in the function fn.
func blockedIn(fn string, stop <-chan struct{}) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		buf := make([]byte, 1<<20)
		for {
			n := runtime.Stack(buf, true)
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				if strings.Contains(g, "sync.(*Mutex).Lock") && strings.Contains(g, fn) && !strings.Contains(g, "compat.blockedIn") {
					close(c)
					return
				}
			}
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	return c
}

// TestRemovedStoreQueryBesideReload: a query of a store the last load's
// upgrades removed, which the multistore answers for until the next Commit
// (and again after a reload before it), runs while a reload on another
// goroutine is in progress: it answers from the store's committed versions
// or fails with ErrNotLoaded, never with "no such store". The reload is
// stopped where it takes the view cache's lock to unbind it (the test holds
// that lock); the query does not take it on this path.
func TestRemovedStoreQueryBesideReload(t *testing.T) {
	ms, _ := removedStoreMultistore(t)
	defer ms.Close()
	q := func() (*types.ResponseQuery, error) {
		return ms.Query(&types.RequestQuery{Path: "/b/key", Data: []byte("x"), Height: 3})
	}
	if res, err := q(); err != nil || string(res.Value) != "v3" {
		t.Fatalf("query of removed store b before the reload: %q, %v; want v3", res.Value, err)
	}

	ms.views.mu.Lock()
	done := make(chan error, 1)
	go func() { done <- ms.LoadLatestVersion() }()
	waitBlockedIn(t, "compat.(*viewCache).bind", done)
	type answer struct {
		res *types.ResponseQuery
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := q()
		answered <- answer{res, err}
	}()
	// the query answers at once, or waits for the cache's lock too
	var a answer
	stop := make(chan struct{})
	select {
	case a = <-answered:
	case <-blockedIn("compat.(*viewCache).get", stop):
	}
	close(stop)
	ms.views.mu.Unlock()
	if a.res == nil && a.err == nil {
		a = <-answered
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err := a.res, a.err
	if err != nil && !errors.Is(err, ErrNotLoaded) {
		t.Errorf("query of removed store b during a reload: %v; want v3 or ErrNotLoaded", err)
	} else if err == nil && string(res.Value) != "v3" {
		t.Errorf("query of removed store b during a reload: value %q; want v3", res.Value)
	}
	if res, err := q(); err != nil || string(res.Value) != "v3" {
		t.Errorf("query of removed store b after the reload: %q, %v; want v3", res.Value, err)
	}
}

// TestRemovedStoreBranchBesideReload: a branch of a committed version whose
// view is taken from the cache just before a reload on another goroutine
// unbinds the cache either fails or has every store the version's branches
// have before and after the reload, the removed store b included; it never
// comes without b (whose GetKVStore then panics "not registered"). Its
// reads may panic ErrVersionReleased once the reload closed the database.
// The branch waits for the view cache's lock (held by the test), then the
// reload does; the lock is handed to the branch first.
func TestRemovedStoreBranchBesideReload(t *testing.T) {
	ms, bKey := removedStoreMultistore(t)
	defer ms.Close()
	read := func(cms types.CacheMultiStore) (got string, p any) {
		defer func() { p = recover() }()
		return string(cms.GetKVStore(bKey).Get([]byte("x"))), nil
	}
	cms, err := ms.CacheMultiStoreWithVersion(3)
	if err != nil {
		t.Fatal(err)
	}
	if got, p := read(cms); p != nil || got != "v3" {
		t.Fatalf("branch of version 3 before the reload: b x=%q, panic %v; want v3", got, p)
	}

	ms.views.mu.Lock()
	type branch struct {
		cms types.CacheMultiStore
		err error
	}
	got := make(chan branch, 1)
	branchDone := make(chan error)
	go func() {
		cms, err := ms.CacheMultiStoreWithVersion(3)
		got <- branch{cms, err}
	}()
	waitBlockedIn(t, "compat.(*viewCache).get", branchDone)
	done := make(chan error, 1)
	go func() { done <- ms.LoadLatestVersion() }()
	waitBlockedIn(t, "compat.(*viewCache).bind", done)
	ms.views.mu.Unlock()
	b := <-got
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.err != nil {
		return // ErrNotLoaded or a version no longer there: not a branch
	}
	v, p := read(b.cms)
	if err, ok := p.(error); ok && errors.Is(err, ErrVersionReleased) {
		return
	}
	if p != nil || v != "v3" {
		t.Errorf("branch of version 3 taken during a reload: b x=%q, panic %v; want v3 or ErrVersionReleased", v, p)
	}
}
