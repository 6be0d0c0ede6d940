package benchmarks

import (
	"sort"

	storetypes "cosmossdk.io/store/types"
	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// RefChangeSets converts a block of changesets (as the workload generator
// and this database use them) into the reference memiavl's types. Keys and
// values are shared, not copied: neither database modifies them.
func RefChangeSets(css []wal.ChangeSet) []*refmemiavl.NamedChangeSet {
	out := make([]*refmemiavl.NamedChangeSet, len(css))
	for i, cs := range css {
		pairs := make([]*refmemiavl.KVPair, len(cs.Pairs))
		for j, p := range cs.Pairs {
			pairs[j] = &refmemiavl.KVPair{Delete: p.Delete, Key: p.Key, Value: p.Value}
		}
		out[i] = &refmemiavl.NamedChangeSet{Name: cs.Name, Changeset: refmemiavl.ChangeSet{Pairs: pairs}}
	}
	// the reference applies changesets in the order given; sort by name as
	// its own callers do
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RefCommitInfo converts the reference memiavl's commit info to the SDK's,
// whose Hash() is the app hash.
func RefCommitInfo(ci *refmemiavl.CommitInfo) *storetypes.CommitInfo {
	out := &storetypes.CommitInfo{Version: ci.Version}
	for _, si := range ci.StoreInfos {
		out.StoreInfos = append(out.StoreInfos, storetypes.StoreInfo{
			Name:     si.Name,
			CommitId: storetypes.CommitID{Version: si.CommitId.Version, Hash: si.CommitId.Hash},
		})
	}
	return out
}
