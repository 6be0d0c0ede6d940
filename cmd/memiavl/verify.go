package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

func newVerifyCmd() *cobra.Command {
	var asJSON, strict bool
	cmd := &cobra.Command{
		Use:   "verify <dir>",
		Short: "Check a database directory: checksums, tree structure, hashes, log continuity",
		Long: `verify checks a database directory without modifying it (it takes no lock and
may run while a node has the database open): every kept snapshot's file
checksums and tree structure (heights, balance, sizes, key order, every
hash), each snapshot's metadata against its trees' roots, the write-ahead
log's checksums and version continuity from the oldest kept snapshot on, and
the latest version's trees node by node after replaying the log. Beside a
running node, a snapshot the node prunes during the check is left out,
and a check that meets its switch to a new snapshot, or its prune of old
ones and of the log before them, runs again (up to 8 times in all) rather
than report the files that went away as damage. If the node switched
snapshots under every attempt, the check gives up with "the writer kept
changing the directory under the reader" and the last attempt's failure:
run it again, or while the node is stopped.

On success it prints a report and exits 0. On the first problem it prints it
(naming the file and byte offset where known) on stderr and exits 1; with
--json it also prints {"ok": false, "error": "..."} on stdout.

A torn tail at the end of the log is a warning, not a failure: it is what
a crash in the middle of an append leaves (a last record cut short, or
one whose checksum fails, or a page the system had not written back, read
as zeros), and the database opens at the version before it. A damaged
last record looks the same, so the versions the tail held are reported
lost. Bytes at the end that no crash leaves (for example a whole record
header failing its length check, followed by bytes that are neither zeros
nor its record's body) are damage, and fail the check.
With --strict, warnings (a torn tail, an unfinished rollback) fail the check
too, with exit code 1.`,
		Example: `  memiavl verify ~/.gaia/data/memiavl.db`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			argPaths(args)
			return runVerify(cmd.OutOrStdout(), args[0], asJSON, strict)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&strict, "strict", false, "fail (exit 1) on warnings too: a torn log tail, an unfinished rollback")
	return cmd
}

type verifyJSON struct {
	Version   int64    `json:"version"`
	AppHash   string   `json:"app_hash"`
	Snapshots []int64  `json:"snapshots"`
	Stores    []string `json:"stores"`
	// StoresHex, when a store name is not valid UTF-8 (which JSON
	// cannot carry exactly), has the hex of every name, in Stores' order.
	StoresHex []string `json:"stores_hex,omitempty"`
	WALFirst  int64    `json:"wal_first"`
	WALLast   int64    `json:"wal_last"`
	// WALTornTail is set when the log ends in a torn tail (see
	// multitree.VerifyReport).
	WALTornTail *wal.TornTail `json:"wal_torn_tail,omitempty"`
	// RollbackTo is set while a rollback is unfinished (see
	// multitree.VerifyReport).
	RollbackTo int64 `json:"rollback_to,omitempty"`
	OK         bool  `json:"ok"`
}

// verifyFailure is what verify --json prints when the check fails.
type verifyFailure struct {
	OK    bool   `json:"ok"` // false
	Error string `json:"error"`
}

func runVerify(w io.Writer, dir string, asJSON, strict bool) error {
	fail := func(err error) error {
		if asJSON {
			// The report still goes to stdout, so that a script reading
			// it sees "ok": false rather than nothing; the error also goes
			// to stderr and the exit code is 1, as without --json.
			if werr := writeJSON(w, verifyFailure{Error: err.Error()}); werr != nil {
				return errors.Join(err, werr)
			}
		}
		return err
	}
	if err := checkDBDir(dir); err != nil {
		return fail(err)
	}
	rep, err := multitree.Verify(dir)
	if err != nil {
		return fail(fmt.Errorf("verify %s: FAILED: %w", dir, err))
	}
	if strict {
		switch {
		case rep.WALTornTail != nil:
			return fail(fmt.Errorf("verify %s: FAILED (--strict): %s", dir, tornTailText(*rep.WALTornTail, rep.Version, false)))
		case rep.RollbackTo != 0:
			return fail(fmt.Errorf("verify %s: FAILED (--strict): a rollback to version %d is unfinished", dir, rep.RollbackTo))
		}
	}
	if asJSON {
		return writeJSON(w, verifyJSON{
			Version: rep.Version, AppHash: hex.EncodeToString(rep.AppHash), Snapshots: rep.Snapshots,
			Stores: rep.Stores, StoresHex: namesHex(rep.Stores), WALFirst: rep.WALFirst, WALLast: rep.WALLast, WALTornTail: rep.WALTornTail,
			RollbackTo: rep.RollbackTo, OK: true,
		})
	}
	var t table
	t.add("directory", "%s", dir)
	t.add("version", "%d", rep.Version)
	t.add("app hash", "%x", rep.AppHash)
	t.add("snapshots", "%v (all verified)", rep.Snapshots)
	if rep.WALLast == 0 {
		t.add("log", "empty")
	} else {
		t.add("log", "versions %d..%d (checksums and continuity verified)", rep.WALFirst, rep.WALLast)
	}
	if tt := rep.WALTornTail; tt != nil {
		t.add("warning", "%s", tornTailText(*tt, rep.Version, false))
	}
	if rep.RollbackTo != 0 {
		t.add("warning", "%s", unfinishedRollbackText(rep.RollbackTo))
	}
	shown := make([]string, len(rep.Stores))
	for i, name := range rep.Stores {
		shown[i] = shownName(name)
	}
	t.add("stores", "%d: %s (checked node by node at version %d)", len(rep.Stores), strings.Join(shown, " "), rep.Version)
	t.add("result", "OK")
	t.write(w)
	return nil
}

// unfinishedRollbackText describes a rollback to version to that a writable
// open has not finished.
func unfinishedRollbackText(to int64) string {
	return fmt.Sprintf("a rollback to version %d is unfinished: every open stops there, and the next writable open (rewrite-snapshot, or the node) finishes it", to)
}
