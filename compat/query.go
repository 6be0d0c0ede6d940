package compat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/store/types"
	cmtprotocrypto "github.com/cometbft/cometbft/proto/tendermint/crypto"
	"github.com/cosmos/iavl"
	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// Query implements types.Queryable exactly as rootmulti routes queries: the
// path is "/<store>/<subpath>" (BaseApp strips the "/store" of an ABCI
// "/store/<store>/key" query before calling it), and the store answers the
// subpath as iavl.Store does:
//
//   - "/key": the value of req.Data at req.Height (0: the latest version but
//     one if the store has it, else the latest, as iavl chooses); with Prove,
//     an ICS23 existence or non-existence proof from the store's tree
//     ("ics23:iavl") followed by the proof of the store's root in the commit
//     info ("ics23:simple"), which together verify against the app hash of
//     that height. A height that is not kept answers with the log "version
//     does not exist" (and with Prove the error rootmulti returns).
//   - "/subspace": every pair under the prefix req.Data, encoded as the SDK's
//     kv.Pairs. It reads the last committed version (rootmulti reads the
//     working state, which differs only between a block's execution and its
//     commit, and between a load with store upgrades and the next commit,
//     for a store renamed by them).
//
// A mounted store that the last load's upgrades deleted (or renamed to
// another mounted store) is answered for until the next Commit, as
// rootmulti keeps it, emptied, until then: "/key" from its committed
// versions, "/subspace" with no pairs.
//
// Errors and empty responses are those of rootmulti, except that a damaged
// snapshot met by a read or a proof is an error wrapping memiavl.ErrCorrupt,
// where iavl.Store panics, and that a query after Close, or during a reload
// (or after one that failed), fails with ErrNotLoaded, proven or not (before
// a load no store is known, as in rootmulti).
func (s *MultiStore) Query(req *types.RequestQuery) (*types.ResponseQuery, error) {
	storeName, subpath, err := parsePath(req.Path)
	if err != nil {
		return &types.ResponseQuery{}, err
	}
	emptied := false
	// the stores of one load, read once (a reload publishes others)
	m := s.published.Load()
	if m != nil && m.db == nil {
		// a reload in progress (or one that failed): no store is
		// loaded, but the multistore was
		return &types.ResponseQuery{}, ErrNotLoaded
	}
	if store := m.store(storeName); store == nil {
		if m := s.removing.Load(); m == nil || !(*m)[storeName] {
			return &types.ResponseQuery{}, errorsmod.Wrapf(types.ErrUnknownRequest, "no such store: %s", storeName)
		}
		emptied = true
	} else if _, ok := store.(*droppedStore); ok {
		emptied = true
	} else if _, ok := store.(*TreeStore); !ok {
		return &types.ResponseQuery{}, errorsmod.Wrapf(types.ErrUnknownRequest, "store %s (type %T) doesn't support queries", storeName, store)
	}
	req.Path = subpath
	res, info, err := s.queryStore(storeName, req, emptied)
	if !req.Prove || subpath != "/key" || errors.Is(err, memiavl.ErrCorrupt) || errors.Is(err, ErrNotLoaded) || errors.Is(err, multitree.ErrClosed) {
		// (rootmulti answers a proven query's other errors with the
		// empty proof's below; a store without a database to read is
		// ours alone)
		return res, err
	}
	if res.ProofOps == nil || len(res.ProofOps.Ops) == 0 {
		return &types.ResponseQuery{}, errorsmod.Wrap(types.ErrInvalidRequest, "proof is unexpectedly empty; ensure height has not been pruned")
	}
	res.ProofOps.Ops = append(res.ProofOps.Ops, info.ProofOp(storeName))
	return res, nil
}

// parsePath splits "/<store>[/<subpath>]" as rootmulti does.
func parsePath(path string) (storeName, subpath string, err error) {
	if !strings.HasPrefix(path, "/") {
		return storeName, subpath, errorsmod.Wrapf(types.ErrUnknownRequest, "invalid path: %s", path)
	}
	paths := strings.SplitN(path[1:], "/", 2)
	storeName = paths[0]
	if len(paths) == 2 {
		subpath = "/" + paths[1]
	}
	return storeName, subpath, nil
}

// pinnedTree returns store's tree at version h and the view it reads, pinned
// (the caller unpins it), or nils if the store does not have that version
// (not kept, or not a store of that version). Damage met while the version
// is rebuilt (a kept snapshot's files, the log) is an error wrapping
// memiavl.ErrCorrupt, not a version the database does not have.
func (s *MultiStore) pinnedTree(db *multitree.DB, store string, h int64) (*multitree.View, *memiavl.Tree, error) {
	if h <= 0 {
		return nil, nil, nil
	}
	v, err := s.views.get(db, h)
	if err != nil {
		if errors.Is(err, memiavl.ErrCorrupt) {
			return nil, nil, err
		}
		if errors.Is(err, multitree.ErrCorrupt) {
			return nil, nil, fmt.Errorf("%w: store %q at version %d: %w", memiavl.ErrCorrupt, store, h, err)
		}
		return nil, nil, nil
	}
	t := v.Tree(store)
	if t == nil || t.Version() != h {
		v.Unpin()
		return nil, nil, nil
	}
	return v, t, nil
}

// inLast reports whether store is in the last commit info.
func inLast(db *multitree.DB, store string) bool {
	_, ok := lastStoreInfo(db, store)
	return ok
}

// queryStore answers a store query ("/key" or "/subspace") like
// iavl.Store.Query. For a proven "/key" query it also returns the commit info
// of the version read. emptied: the store's working state is empty (see
// Query), which "/subspace" reads.
func (s *MultiStore) queryStore(store string, req *types.RequestQuery, emptied bool) (res *types.ResponseQuery, info *types.CommitInfo, err error) {
	if len(req.Data) == 0 {
		return &types.ResponseQuery{}, nil, errorsmod.Wrap(types.ErrTxDecode, "query cannot be zero length")
	}
	db := s.db.Load()
	if db == nil {
		return &types.ResponseQuery{}, nil, ErrNotLoaded
	}
	defer func() {
		// A Close or a reload that began meanwhile unbound the view cache
		// before it closed db: what was read since (the latest version
		// of a closed database is 0, a version its views no longer
		// serve) may not be the answer.
		if !s.views.boundTo(db) {
			res, info, err = &types.ResponseQuery{}, nil, ErrNotLoaded
		}
	}()
	var view *multitree.View
	var tree *memiavl.Tree
	defer func() {
		if view != nil {
			view.Unpin()
		}
	}()
	height := req.Height
	if height == 0 {
		latest := db.Version()
		if view, tree, err = s.pinnedTree(db, store, latest-1); err != nil {
			return &types.ResponseQuery{}, nil, err
		} else if tree != nil {
			height = latest - 1
		} else if view, tree, err = s.pinnedTree(db, store, latest); err != nil {
			return &types.ResponseQuery{}, nil, err
		} else if tree != nil || latest > 0 && inLast(db, store) {
			height = latest
		} else {
			// a store without a committed version (a new database, or
			// added by the working version's upgrades): iavl answers
			// at the store's version 0, which holds nothing
			height = 0
		}
	}
	res = &types.ResponseQuery{Height: height}

	switch req.Path {
	case "/key":
		key := req.Data
		res.Key = key
		if tree == nil && height != 0 {
			if view, tree, err = s.pinnedTree(db, store, height); err != nil {
				return &types.ResponseQuery{}, nil, err
			}
		}
		if tree == nil && height == 0 {
			break
		}
		if tree == nil {
			res.Log = iavl.ErrVersionDoesNotExist.Error()
			break
		}
		value, err := tree.Get(key)
		if err != nil {
			// iavl.Store panics here; the error is returned instead
			return &types.ResponseQuery{}, nil, fmt.Errorf("memiavl: store %q at version %d: %w", store, height, err)
		}
		res.Value = value
		if !req.Prove {
			break
		}
		var proof *ics23.CommitmentProof
		if value != nil {
			proof, err = tree.GetMembershipProof(key)
		} else {
			proof, err = tree.GetNonMembershipProof(key)
		}
		if err != nil {
			// the value was read, so a proof must exist: a damaged
			// snapshot (iavl.Store panics)
			return &types.ResponseQuery{}, nil, fmt.Errorf("memiavl: store %q at version %d: proof of %s: %w", store, height, hexkey.Upper(key), err)
		}
		op := types.NewIavlCommitmentOp(key, proof)
		res.ProofOps = &cmtprotocrypto.ProofOps{Ops: []cmtprotocrypto.ProofOp{op.ProofOp()}}
		info = view.CommitInfo()

	case "/subspace":
		subspace := req.Data
		res.Key = subspace
		if view != nil {
			view.Unpin()
			view, tree = nil, nil
		}
		if !emptied {
			if view, tree, err = s.pinnedTree(db, store, db.Version()); err != nil {
				return &types.ResponseQuery{}, nil, err
			}
		}
		buf := []byte{}
		if tree != nil {
			it := tree.Iterator(subspace, types.PrefixEndBytes(subspace), true)
			for ; it.Valid(); it.Next() {
				buf = appendPair(buf, it.Key(), it.Value())
			}
			err := it.Error()
			_ = it.Close()
			if err != nil {
				return &types.ResponseQuery{}, nil, fmt.Errorf("memiavl: store %q: subspace %s: %w", store, hexkey.Upper(subspace), err)
			}
		}
		res.Value = buf

	default:
		return &types.ResponseQuery{}, nil, errorsmod.Wrapf(types.ErrUnknownRequest, "unexpected query path: %v", req.Path)
	}
	return res, info, nil
}

// appendPair appends one pair of the SDK's kv.Pairs message
// (cosmos.store.internal.kv.v1beta1.Pairs: repeated Pair pairs = 1; Pair:
// bytes key = 1, bytes value = 2), with gogoproto's encoding: empty fields
// are omitted.
func appendPair(dst, key, value []byte) []byte {
	n := 0
	if len(key) > 0 {
		n += 1 + uvarintLen(uint64(len(key))) + len(key)
	}
	if len(value) > 0 {
		n += 1 + uvarintLen(uint64(len(value))) + len(value)
	}
	dst = append(dst, 0x0a)
	dst = binary.AppendUvarint(dst, uint64(n))
	if len(key) > 0 {
		dst = append(dst, 0x0a)
		dst = binary.AppendUvarint(dst, uint64(len(key)))
		dst = append(dst, key...)
	}
	if len(value) > 0 {
		dst = append(dst, 0x12)
		dst = binary.AppendUvarint(dst, uint64(len(value)))
		dst = append(dst, value...)
	}
	return dst
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
