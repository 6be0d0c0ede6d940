package wal

import (
	"math/rand/v2"
	"testing"
)

// TestPowerLossModelFindsLoss checks that the power-loss model can fail:
// with directory fsyncs ignored by the model, a segment's name is not
// durable and acknowledged versions must be reported lost.
func TestPowerLossModelFindsLoss(t *testing.T) {
	cfg := plCfg{SyncEveryCommit, 0, 6000, 0, false}
	rng := rand.New(rand.NewPCG(3, 3^0x9e3779b97f4a7c15))
	old := plEntries(rng, 1, 30, cfg.big)
	newer := append(append([]Entry(nil), old[:plRollback]...), plEntries(rng, plRollback+1, 30-plRollback, cfg.big)...)
	fs := newPLFS()
	fs.ignoreSyncDir = true
	points := plWorkload(t, cfg, fs, old, newer)
	res := &plResult{}
	for _, pt := range points {
		for _, img := range pt.st.images(rng, 24) {
			plCheck(cfg, pt, img, old, newer, res, false)
		}
	}
	if len(res.fails["lost-acknowledged"]) == 0 {
		t.Fatalf("the model found no lost acknowledged version with directory fsyncs ignored: %v", res.fails)
	}
	t.Logf("self-check: %d images, %d lost-acknowledged found as expected", res.images, len(res.fails["lost-acknowledged"]))
}
