package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestImportInterrupted sends SIGINT to import and import-iavl as they
// create the directory they write the database in (strace injects it at
// that mkdirat, before any tree is written: the database's directory, or
// the staging directory beside one they replace): each must stop, exit 1 saying it was
// interrupted, and leave what a failed import leaves (no database, or the
// database at version 0 it was to replace); run again, it imports. A
// signal handled only after the import's last check lets it finish: such
// a run is tried again, up to 3 times. Skipped where strace is not
// installed.
func TestImportInterrupted(t *testing.T) {
	if os.Getenv("MEMIAVL_CLI_CHILD_ARGS") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	src := t.TempDir()
	hash30 := makeDB(t, src, 0.02, 30)
	stream := filepath.Join(t.TempDir(), "stream.bin")
	mustCLI(t, "export", src, stream)
	iavlParent := t.TempDir()
	hash12 := makeIAVLApp(t, iavlParent, 12)
	appDB := filepath.Join(iavlParent, "application.db")
	empty := makeEmptyDB(t)

	ops := []struct {
		name    string
		prepare func(dir string)
		args    func(dir string) []string
		before  int64 // dbState before the import: 0 none, -1 at version 0 (replaced through a staging directory)
		version int64
		hash    string
	}{
		{"import", func(string) {}, func(dir string) []string { return []string{"import", "--height", "30", stream, dir} }, 0, 30, hash30},
		{"import over an empty database", func(dir string) { copyDir(t, empty, dir) },
			func(dir string) []string { return []string{"import", "--height", "30", stream, dir} }, -1, 30, hash30},
		{"import-iavl", func(string) {}, func(dir string) []string { return []string{"import-iavl", appDB, dir} }, 0, 12, hash12},
		{"import-iavl over an empty database", func(dir string) { copyDir(t, empty, dir) },
			func(dir string) []string { return []string{"import-iavl", appDB, dir} }, -1, 12, hash12},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			for attempt := 1; ; attempt++ {
				var dir string
				var args []string
				out, err := testutil.RetryStraceFailures(t, strace, "SIGINT at mkdirat", func() ([]byte, error) {
					dir = filepath.Join(t.TempDir(), "db")
					op.prepare(dir)
					args = op.args(dir)
					target := dir
					if op.before == -1 {
						target = dir + ".import.tmp"
					}
					return runCLIChild(args, func(argv ...string) []string {
						return testutil.SignalAt(strace, "mkdirat", target, "INT", argv...)
					})
				})
				v, hash := dbState(t, dir)
				if err == nil {
					// the signal came after the import's last check
					if v != op.version || hash != op.hash {
						t.Fatalf("memiavl %v finished at version %d, app hash %s\n%s", args, v, hash, out)
					}
					if attempt == 3 {
						t.Fatalf("memiavl %v: in %d runs, the interrupt never stopped the import\n%s", args, attempt, out)
					}
					continue
				}
				if code := exitCode(err); code != exitFailure || !bytes.Contains(out, []byte("interrupted; nothing was imported")) {
					t.Fatalf("memiavl %v interrupted: exit %d, want %d and the interruption reported\n%s", args, code, exitFailure, out)
				}
				if v != op.before {
					t.Fatalf("memiavl %v interrupted: the database is at version %d, want %d (-1: version 0, 0: none)\n%s", args, v, op.before, out)
				}
				if _, err := os.Lstat(dir + ".import.tmp"); err == nil {
					t.Fatalf("memiavl %v interrupted: left its staging directory", args)
				}
				t.Logf("attempt %d: %s", attempt, bytes.TrimSpace(out))
				mustCLI(t, args...)
				if v, hash := dbState(t, dir); v != op.version || hash != op.hash {
					t.Fatalf("memiavl %v rerun: version %d, app hash %s", args, v, hash)
				}
				return
			}
		})
	}
}

// failingReader fails every read with err.
type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// TestEndChecked: the stream import's reader ends cleanly at the end of the
// compressed stream when the file ends there, fails on bytes after it, and
// passes on an error reading the file after it (an interrupt's, an I/O
// error) as that error, not as bytes after the end.
func TestEndChecked(t *testing.T) {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write([]byte("payload")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	eio := errors.New("read error")
	for name, c := range map[string]struct {
		after io.Reader
		want  string
	}{
		"clean end":        {bytes.NewReader(nil), ""},
		"bytes after":      {bytes.NewReader([]byte{0}), "bytes after the end of the compressed stream"},
		"read error after": {failingReader{eio}, eio.Error()},
	} {
		br := bufio.NewReader(io.MultiReader(bytes.NewReader(z.Bytes()), c.after))
		zr, err := zlib.NewReader(br)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(endChecked{zr, br})
		if string(got) != "payload" {
			t.Fatalf("%s: read %q", name, got)
		}
		if c.want == "" && err != nil || c.want != "" && (err == nil || err.Error() != c.want) {
			t.Fatalf("%s: error %v, want %q", name, err, c.want)
		}
	}
}

// TestInterruptedImportWording: an import error is reported as an
// interruption only when it is the signal's (it wraps the context's error),
// not when the import had failed for another reason before the signal.
func TestInterruptedImportWording(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	other := errors.New("invalid stream")
	if err := interruptedImport(ctx, "d", other); err != other {
		t.Errorf("no signal: %v", err)
	}
	cancel()
	if err := interruptedImport(ctx, "d", other); err != other {
		t.Errorf("a failure before the signal: %v, want it unchanged", err)
	}
	stopped := fmt.Errorf("reading: %w", context.Canceled)
	if err := interruptedImport(ctx, "d", stopped); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted; nothing was imported into d") {
		t.Errorf("stopped by the signal: %v", err)
	}
}
