package main

import (
	"bufio"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"
	"github.com/spf13/cobra"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// maxStreamItem bounds one message of a state-sync stream, as the SDK's
// snapshot stream reader does: a node does not restore a stream holding a
// longer one either.
const maxStreamItem = compat.MaxSnapshotItem

// boundedItems reads a stream's items with protoio's delimited reader
// bounded by maxStreamItem, whose error for a longer item ("short buffer")
// it replaces by one that says so.
type boundedItems struct{ r protoio.Reader }

func (b boundedItems) ReadMsg(msg proto.Message) error {
	err := b.r.ReadMsg(msg)
	if errors.Is(err, io.ErrShortBuffer) {
		return fmt.Errorf("an item is longer than %d bytes, the SDK's bound for a snapshot item (%w)", maxStreamItem, err)
	}
	return err
}

// boundedWriter writes a stream's items, refusing one longer than
// maxStreamItem: the SDK's reader (and import) refuse the stream at it, so
// the export fails there rather than write a file that restores nowhere.
type boundedWriter struct{ w protoio.Writer }

func (b boundedWriter) WriteMsg(msg proto.Message) error {
	if m, ok := msg.(interface{ Size() int }); ok {
		if n := m.Size(); n > maxStreamItem {
			what := "an item"
			if it, ok := msg.(*snapshottypes.SnapshotItem); ok && it.GetIAVL() != nil {
				what = "the item of key " + hexkey.Lower(it.GetIAVL().Key)
			}
			return fmt.Errorf("%s is %d bytes, longer than %d, the SDK's bound for a snapshot item: no node restores a stream holding it", what, n, maxStreamItem)
		}
	}
	return b.w.WriteMsg(msg)
}

const streamFormatHelp = `The file holds the SDK's state-sync snapshot stream (format 3): the
length-delimited SnapshotItem messages (a store item, then the store's IAVL
nodes in post-order, for each store in name order), zlib-compressed, i.e.
the concatenation of the chunks the SDK's snapshot manager produces.`

func newExportCmd() *cobra.Command {
	var (
		height int64
		force  bool
	)
	cmd := &cobra.Command{
		Use:         "export <dir> <file>",
		Annotations: changesFiles,
		Short:       "Write a version of a database as a state-sync snapshot stream file",
		Long: `export opens a database read-only (it takes no lock) and writes the state of
--height (default: the latest version) to <file> as a state-sync snapshot
stream, the same one a node serves to peers. The file is written under a
temporary name beside it and renamed when complete. An existing <file> is
refused unless --force is given (which replaces only a regular file, not a
symbolic link, pipe or device), and so is a <file> inside a database
directory. A tree with a node whose item would be longer than the SDK's
bound for one stream item (64e6 bytes: a value of about that size), which
no node restores, fails the export, and no file is left.

` + streamFormatHelp,
		Example: `  memiavl export --height 1200 ./memiavl.db state-1200.bin`,
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			argPaths(args)
			return runExport(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1], height, force)
		},
	}
	cmd.Flags().Int64Var(&height, "height", 0, "version to export (default: the latest)")
	cmd.Flags().BoolVar(&force, "force", false, "replace <file> if it exists and is a regular file")
	return cmd
}

func runExport(w, diag io.Writer, dir, file string, height int64, force bool) (err error) {
	if height < 0 {
		return usagef("--height must not be negative")
	}
	if err := checkDBDir(dir); err != nil {
		return err
	}
	// the destination is checked before any work
	if db := enclosingDatabase(file); db != "" {
		return fmt.Errorf("refusing to write %s inside the database directory %s", file, db)
	}
	if err := checkDirDestination(filepath.Dir(file)); err != nil {
		return err
	}
	switch fi, err := os.Lstat(file); {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%s is a directory", file)
	case err == nil && !force:
		return fmt.Errorf("%s exists; --force replaces it", file)
	case err == nil && !fi.Mode().IsRegular():
		// the stream is written beside it and renamed over it, which
		// would put a regular file in the place of a pipe or a device
		return fmt.Errorf("%s is not a regular file (%v); --force replaces only regular files", file, fi.Mode().Type())
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if _, err := os.Stat(filepath.Dir(file)); err != nil {
		return fmt.Errorf("directory of %s: %w", file, err)
	}
	// compat.SnapshotDB checks the snapshot files the version it exports
	// comes from before it writes anything
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, SnapshotInterval: -1, OpenCheck: multitree.OpenCheckNone})
	if err != nil {
		return err
	}
	defer db.Close()
	if tt, ok := db.LogTornTail(); ok {
		fmt.Fprintf(diag, "export: warning: %s\n", tornTailText(tt, db.Version(), false))
	}
	if height == 0 {
		height = db.Version()
	}
	if height == 0 {
		return fmt.Errorf("%s has no committed version to export", dir)
	}
	start := time.Now()
	// a signal stops the write, and the partial file is removed
	ctx, stop := interruptible(context.Background())
	defer stop()
	f, err := createBeside(file)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			if ctx.Err() != nil {
				err = fmt.Errorf("interrupted; %s was not written: %w", file, err)
			}
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw, err := zlib.NewWriterLevel(bw, zlib.BestSpeed)
	if err != nil {
		return err
	}
	counter := &countingWriter{w: zw, ctx: ctx}
	if err := compat.SnapshotDB(db, uint64(height), boundedWriter{protoio.NewDelimitedWriter(counter)}); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	// the file's name is durable before the export reports success
	if d, err := os.Open(filepath.Dir(file)); err == nil {
		serr := d.Sync()
		d.Close()
		if serr != nil {
			return fmt.Errorf("fsync %s: %w", filepath.Dir(file), serr)
		}
	}
	fi, _ := os.Stat(file)
	var size int64
	if fi != nil {
		size = fi.Size()
	}
	fmt.Fprintf(w, "exported version %d of %s to %s: %s (%s uncompressed) in %.2fs\n",
		height, dir, file, formatBytes(size), formatBytes(counter.n), time.Since(start).Seconds())
	return nil
}

// countingWriter counts what it writes to w; with ctx set, it fails once
// ctx is done.
type countingWriter struct {
	w   io.Writer
	n   int64
	ctx context.Context
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.ctx != nil {
		if err := c.ctx.Err(); err != nil {
			return 0, err
		}
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func newImportCmd() *cobra.Command {
	var (
		height int64
		stores []string
	)
	cmd := &cobra.Command{
		Use:         "import <file> <dir>",
		Annotations: changesFiles,
		Short:       "Create a database from a state-sync snapshot stream file",
		Long: `import restores a database in <dir> at --height from a state-sync snapshot
stream file (written by 'memiavl export', or the concatenated chunks of an
SDK snapshot). The nodes are checked as they are read and go straight into
the new snapshot files. Into a <dir> without a database the restore is
written in place and becomes a database only when complete (its 'current'
file is written last); other files in <dir> are left alone. <dir> may hold
a database only if its latest version is 0 (nothing committed) or
--height; the restore is then staged beside <dir> and swapped in only once
complete and durable (the two directories exchanged in one rename where
the system supports it, else two renames that the next writable open or
import finishes; meanwhile the read-only commands read the database that
open moves in), and that database is replaced as a whole, versions before
--height included, with any other files in <dir> (so the stream file
must then not lie inside <dir>). Either way an
interrupted import leaves <dir> with the database it had (or none) or with
the new one, and can be rerun. An interrupt (Ctrl-C, SIGTERM) stops it at
its next read of the stream and exits 1, leaving what a failed import
leaves (once the stream is read to its end the import finishes); a second
ends it at once, as a kill does. Items after the stores (snapshot
extensions of an SDK snapshot) are read to the end of the file, which
checks the stream's checksum, and left out, with a note on stderr.

` + streamFormatHelp,
		Example: `  memiavl import --height 1200 state-1200.bin ./memiavl.db`,
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			argPaths(args)
			return runImport(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1], height, stores)
		},
	}
	cmd.Flags().Int64Var(&height, "height", 0, "version of the state in the stream (required)")
	cmd.Flags().StringSliceVar(&stores, "stores", nil, "stores of the new database; those the stream lacks are created empty (default: the stream's)")
	return cmd
}

// endChecked reads a zlib stream (whose reader checks its checksum before it
// returns io.EOF) and turns its end into an error when the file goes on
// after it: a state-sync stream file is one zlib stream, and bytes after it
// mean a damaged or mistaken file, to be refused before the import commits.
type endChecked struct {
	zr io.Reader
	br *bufio.Reader
}

func (r endChecked) Read(p []byte) (int, error) {
	n, err := r.zr.Read(p)
	if err == io.EOF {
		switch _, perr := r.br.Peek(1); {
		case perr == nil:
			return n, errors.New("bytes after the end of the compressed stream")
		case perr != io.EOF:
			return n, perr // the file could not be read to its end
		}
	}
	return n, err
}

// checkedToEnd hands RestoreDB the stream's items. At the first item after
// the stores, before RestoreDB commits, it reads the rest of the file, so
// that its checksum, which covers the whole stream and is checked only at
// its end, refuses a damaged file as it does one without extensions. The
// items after the stores must be snapshot extensions (an extension item,
// then its payloads, for each), as the SDK's snapshot manager requires: a
// store or node among them is refused, not left out with the extensions.
type checkedToEnd struct {
	items protoio.Reader
	rest  io.Reader
}

func (r checkedToEnd) ReadMsg(msg proto.Message) error {
	if err := r.items.ReadMsg(msg); err != nil {
		return err
	}
	it, ok := msg.(*snapshottypes.SnapshotItem)
	if !ok {
		return nil
	}
	switch it.Item.(type) {
	case *snapshottypes.SnapshotItem_Store, *snapshottypes.SnapshotItem_IAVL:
		return nil
	case *snapshottypes.SnapshotItem_Extension:
		// the extensions' items, each bounded as every item is
		for n := 1; ; n++ {
			var next snapshottypes.SnapshotItem
			err := r.items.ReadMsg(&next)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("the stream after the stores: %w", err)
			}
			switch next.Item.(type) {
			case *snapshottypes.SnapshotItem_Extension, *snapshottypes.SnapshotItem_ExtensionPayload:
			default:
				return fmt.Errorf("%w: item %d after the stores' is of type %T; only snapshot extensions may follow the stores",
					compat.ErrSnapshotStream, n, next.Item)
			}
		}
	default:
		// RestoreDB refuses it; the file's damage, if any, is the reason
		if _, err := io.Copy(io.Discard, r.rest); err != nil {
			return fmt.Errorf("the stream after the stores: %w", err)
		}
		return nil
	}
}

func runImport(ctx context.Context, w, diag io.Writer, file, dir string, height int64, stores []string) error {
	if height <= 0 {
		return usagef("--height is required and must be positive")
	}
	dir = absDir(dir)
	if err := refuseSourceInside(file, dir, "the stream file"); err != nil {
		return err
	}
	if err := refuseInsideDatabase(dir); err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	ctx, stop := interruptible(ctx)
	defer stop()
	// a signal fails the next read of the stream, and the restore with it
	br := bufio.NewReaderSize(ctxReader{ctx, f}, 1<<20)
	zr, err := zlib.NewReader(br)
	if err != nil {
		return fmt.Errorf("%s is not a state-sync stream file: %w", file, err)
	}
	defer zr.Close()
	rest := endChecked{zr, br}
	next, err := compat.RestoreDB(dir, uint64(height), snapshottypes.CurrentFormat,
		checkedToEnd{boundedItems{protoio.NewDelimitedReader(rest, maxStreamItem)}, rest}, multitree.Options{InitialStores: stores})
	if errors.Is(err, multitree.ErrInvalidOptions) && !errors.Is(err, compat.ErrSnapshotStream) {
		return usageError{err} // the options come from --stores (not the stream's store names)
	}
	if err != nil {
		return interruptedImport(ctx, dir, err)
	}
	if next.Item != nil {
		fmt.Fprintf(diag, "import: the stream goes on with an item of type %T after the stores; it was ignored\n", next.Item)
	}
	// only the commit info is read, of files the import just wrote and
	// checked: no checksum check to start and stop
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, SnapshotInterval: -1, OpenCheck: multitree.OpenCheckNone})
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(w, "imported %s into %s at version %d in %.2fs: %d stores, app hash %x\n",
		file, dir, db.Version(), time.Since(start).Seconds(), len(db.StoreNames()), db.LastCommitInfo().Hash())
	return nil
}

// createBeside creates a new file beside file, named after it, with the
// permissions a file created by the shell gets (0666 less the umask;
// os.CreateTemp makes 0600).
func createBeside(file string) (*os.File, error) {
	for {
		tmp := fmt.Sprintf("%s.%d-%d.tmp", file, os.Getpid(), rand.Uint32())
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
}
