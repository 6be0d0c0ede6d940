package benchmarks

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"

	"github.com/seed-6dfbb450/memiavl/internal/workload"
)

// TestCLIImportMemIAVL writes a directory with the reference memiavl (a
// snapshot and log entries after it), converts it with 'memiavl
// import-memiavl' and checks the result with 'memiavl dump' and 'memiavl
// verify'. It lives here because only this module has the reference
// library; the command is built in the main module.
func TestCLIImportMemIAVL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := filepath.Join(t.TempDir(), "memiavl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/memiavl")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	gen, _ := workload.New(workload.Config{Seed: 9, Scale: 0.01})
	ref := filepath.Join(t.TempDir(), "ref")
	db, err := refmemiavl.Load(ref, refOptions(true, gen.Stores()))
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 30; v++ {
		if err := db.ApplyChangeSets(RefChangeSets(gen.Block(v))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		if v == 20 {
			if err := db.RewriteSnapshot(); err != nil {
				t.Fatal(err)
			}
			if err := db.Reload(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := hex.EncodeToString(RefCommitInfo(db.LastCommitInfo()).Hash())
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	dst := filepath.Join(t.TempDir(), "memiavl.db")
	if code, out, errs := run("import-memiavl", ref, dst); code != 0 || !strings.Contains(strings.ToLower(out), want) {
		t.Fatalf("import-memiavl: exit %d, want app hash %s\n%s%s", code, want, out, errs)
	}
	code, out, errs := run("dump", "--json", dst)
	var res struct {
		Version int64  `json:"version"`
		AppHash string `json:"app_hash"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Version != 30 || res.AppHash != want {
		t.Fatalf("dump: exit %d %s %s", code, out, errs)
	}
	if code, out, errs := run("verify", dst); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
	// a second import into the same directory is refused
	if code, _, _ := run("import-memiavl", ref, dst); code != 1 {
		t.Errorf("import into an existing database: exit %d, want 1", code)
	}
	_ = os.RemoveAll(dst)
}
