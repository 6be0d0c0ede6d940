package wal

import (
	"errors"
	"fmt"
	"testing"
)

// oversizedEntry returns an entry of version v whose encoding exceeds
// MaxEntrySize, made of many pairs sharing one small value, so that it
// costs a few MiB of memory.
func oversizedEntry(v int64) Entry {
	val := make([]byte, 64<<10)
	pairs := make([]KVPair, MaxEntrySize/len(val)+1)
	for i := range pairs {
		pairs[i] = KVPair{Key: []byte("k"), Value: val}
	}
	return Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: pairs}}}
}

// TestAsyncAppendStateBeforeEntry: Append's doc says a writer
// failure "is returned by this and every later Append, Flush and Close",
// and ErrClosed "is returned by every operation on a closed Log". In
// synchronous mode Append checks the log's state before it looks at the
// entry; in asynchronous mode it checks the entry first, so after a writer
// failure an Append of an oversized (or invalid) entry returns
// ErrEntryTooLarge (ErrInvalidEntry) instead of the failure, and one on a
// closed log does not return ErrClosed. A caller that takes
// ErrEntryTooLarge as "commit this version another way" (multitree commits
// it by a snapshot) goes on as if the log were sound.
func TestAsyncAppendStateBeforeEntry(t *testing.T) {
	big := oversizedEntry(4)
	if EncodedSize(big) <= MaxEntrySize {
		t.Fatal("the entry is not oversized")
	}
	for _, async := range []int{0, 4} {
		t.Run(fmt.Sprintf("async%d", async), func(t *testing.T) {
			fs := newMemFS()
			l := mustOpen(t, memDir, Options{fs: fs, AsyncBuffer: async})
			mustAppend(t, l, Entry{Version: 1})
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			fs.setHook(failAfter("write", 0))
			var err error
			for v := int64(2); v <= 3 && err == nil; v++ {
				err = l.Append(Entry{Version: v})
			}
			if err == nil {
				err = l.Flush()
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("the injected write failure was not reported: %v", err)
			}
			next := l.LastVersion() + 1
			big.Version = next
			if err := l.Append(big); !errors.Is(err, errInjected) {
				t.Errorf("Append of an oversized entry after the writer failed: %v, want the sticky write error", err)
			}
			if err := l.Append(Entry{Version: 0}); !errors.Is(err, errInjected) {
				t.Errorf("Append of an entry of version 0 after the writer failed: %v, want the sticky write error", err)
			}
			fs.setHook(nil)
			_ = l.Close()
			if err := l.Append(big); !errors.Is(err, ErrClosed) {
				t.Errorf("Append of an oversized entry on a closed log: %v, want ErrClosed", err)
			}
			if err := l.Append(Entry{Version: 0}); !errors.Is(err, ErrClosed) {
				t.Errorf("Append of an entry of version 0 on a closed log: %v, want ErrClosed", err)
			}
		})
	}
}
