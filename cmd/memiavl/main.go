// Command memiavl is the database's command-line tool: a workload benchmark,
// an offline snapshot rewrite, a consistency checker, inspection of a
// database and its write-ahead log, and state-sync stream export and import.
//
// Exit codes: 0 success, 1 the operation failed (for example verify found
// corruption, or a report could not be written to stdout), 2 usage error.
// Results go to stdout, diagnostics to stderr.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks an error in the command line rather than in the
// operation.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// run executes the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	out := &stickyWriter{w: stdout}
	root.SetOut(out)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil && out.err != nil {
		if cmd != nil && cmd.Annotations[changesKey] != "" {
			// the files are written: a failure would have a script
			// do it again, and an import then find the database
			fmt.Fprintf(stderr, "memiavl: warning: the work is done, but its summary could not be written: %v\n", out.err)
		} else {
			// results that did not reach stdout (a full disk) are a
			// failure, not a success with no output
			err = fmt.Errorf("writing the results: %w", out.err)
		}
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "memiavl: %v\n", err)
	if isUsageError(err) {
		fmt.Fprintln(stderr, "Run 'memiavl --help' or 'memiavl <command> --help' for usage.")
		return exitUsage
	}
	return exitFailure
}

// changesKey marks the commands whose work is the files they write (their
// stdout is a summary of it), as opposed to those whose work is what they
// print.
const changesKey = "changes"

var changesFiles = map[string]string{changesKey: "files"}

// stickyWriter passes writes to w until one fails, and keeps that error:
// the commands print with fmt.Fprintf and do not check each write. (A
// closed pipe on stdout ends the process with SIGPIPE before it gets here.)
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	s.err = err
	return n, err
}

func isUsageError(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	// errors cobra itself returns for the command line
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument",
		"flag needs an argument", "required flag", "accepts ", "requires at least", "requires at most"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "memiavl",
		Short: "Tools for memiavl databases: benchmark, verify, inspect, rewrite snapshots",
		Long: `memiavl works with the database directories of the memiavl state store
(a memory-mapped IAVL tree per module store, a write-ahead log, snapshots).

Exit codes: 0 success, 1 the operation failed (e.g. verify found corruption,
or a report could not be written to stdout), 2 usage error. Results are printed on
stdout, diagnostics on stderr; the warnings dump and verify give about the database
(a torn last log record) are part of their report, on stdout.

A path with a ".." in it is taken as the system takes it: link/../x names
x beside the link's target, not beside the link (a ".." after a part that
does not exist is taken as text).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetHelpCommand(newHelpCmd())
	root.AddCommand(
		newBenchCmd(),
		newRewriteCmd(),
		newVerifyCmd(),
		newDumpCmd(),
		newWALCmd(),
		newExportCmd(),
		newImportCmd(),
		newImportIAVLCmd(),
		newImportMemIAVLCmd(),
	)
	return root
}

// newHelpCmd is cobra's help command, except that a topic naming no command
// is a usage error (exit 2) rather than the main help with exit 0.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "help prints the help of the named command, or of memiavl itself.",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	}
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

// exactArgs wants n positional arguments, named in the command's Use line.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %d argument(s), got %d (usage: %s)", cmd.CommandPath(), n, len(args), cmd.UseLine())
		}
		for i, a := range args {
			// every argument is a path: an empty one (an unset shell
			// variable) would mean the working directory
			if a == "" {
				return usagef("%s: argument %d is empty (usage: %s)", cmd.CommandPath(), i+1, cmd.UseLine())
			}
		}
		return nil
	}
}
