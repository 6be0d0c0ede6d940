#!/usr/bin/env bash
# Runs the test suite: the quick slice of every randomized, crash and fuzz
# test. Set LONG=1 for larger runs, FULL=1 for the full-size ones (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${FULL:-0}" = "1" ]; then
	# the largest size of every campaign (see testutil.Full)
	MEMIAVL_FULL=1 exec go test -count=1 -timeout 60m ./... "$@"
fi
if [ "${LONG:-0}" = "1" ]; then
	# the middle size (see testutil.QuickByDefault)
	exec go test -short=false -count=1 -timeout 60m ./... "$@"
fi
exec go test -short -count=1 -timeout 20m ./... "$@"
