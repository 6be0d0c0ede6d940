package wal

import (
	"bytes"
	"fmt"
	"testing"
)

// TestReplayResumeAfterCuts: a Replay starts where the previous one
// stopped when it can; after TruncateBack and Reset rewrite the log's tail
// with records of other sizes, replays read the new records, never from a
// stale position.
func TestReplayResumeAfterCuts(t *testing.T) {
	entry := func(v int64, gen int) Entry {
		return Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{
			{Key: []byte(fmt.Sprint(v)), Value: bytes.Repeat([]byte{byte(gen)}, 1+int(v)%7+gen*13)}}}}}
	}
	want := map[int64]Entry{}
	appendGen := func(l *Log, from, to int64, gen int) {
		for v := from; v <= to; v++ {
			e := entry(v, gen)
			mustAppend(t, l, e)
			want[v] = e
		}
	}
	check := func(l *Log, from, to int64) {
		t.Helper()
		v := from
		err := l.Replay(from, to, func(e Entry) error {
			if e.Version != v || !bytes.Equal(e.ChangeSets[0].Pairs[0].Value, want[v].ChangeSets[0].Pairs[0].Value) {
				return fmt.Errorf("version %d: got entry %d %x", v, e.Version, e.ChangeSets[0].Pairs[0].Value)
			}
			v++
			return nil
		})
		if err != nil || v != to+1 {
			t.Fatalf("Replay(%d, %d): %v (read up to %d)", from, to, err, v-1)
		}
	}
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	defer l.Close()
	appendGen(l, 1, 50, 0)
	for v := int64(1); v <= 50; v++ { // one version at a time, each resuming
		check(l, v, v)
	}
	check(l, 10, 10) // before the resume position
	check(l, 15, 15)
	if err := l.TruncateBack(12); err != nil {
		t.Fatal(err)
	}
	appendGen(l, 13, 40, 1)
	check(l, 20, 20) // after the position the last replay (of 15) stopped at
	for v := int64(13); v <= 40; v += 3 {
		check(l, v, v)
	}
	check(l, 1, 40)
	check(l, 30, 30)
	if err := l.Reset(100); err != nil {
		t.Fatal(err)
	}
	appendGen(l, 100, 120, 2)
	for v := int64(100); v <= 120; v++ {
		check(l, v, v)
	}
	l.RollAt(121)
	appendGen(l, 121, 130, 3)
	check(l, 125, 125)
	check(l, 110, 126)
	check(l, 127, 130)
	if err := l.Verify(); err != nil {
		t.Fatal(err)
	}
}
