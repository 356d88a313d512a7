package redisproc

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestBuildBinaries: a main package is built under the name go build
// gives it, and a package that does not build is an error that carries
// the compiler's words, not a missing file later.
func TestBuildBinaries(t *testing.T) {
	dir := t.TempDir()
	bins, err := BuildBinaries(context.Background(), dir, "./examples/libraries/ria-drive")
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + "/ria-drive"; len(bins) != 1 || bins[0] != want {
		t.Fatalf("built %v, want [%s]", bins, want)
	}
	st, err := os.Stat(bins[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&0o111 == 0 {
		t.Errorf("%s: mode %v, want an executable", bins[0], st.Mode())
	}

	_, err = BuildBinaries(context.Background(), t.TempDir(), "./no/such/package")
	if err == nil || !strings.Contains(err.Error(), "go build ./no/such/package") {
		t.Errorf("a package that does not exist: %v, want the go build error", err)
	}
}

// TestModuleRoot: the root is found from a package directory, with the
// module path that names the binary of ".".
func TestModuleRoot(t *testing.T) {
	root, module, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if module != "github.com/slotexporter/slot_exporter" {
		t.Errorf("module %q", module)
	}
	if _, err := os.Stat(root + "/go.mod"); err != nil || strings.HasSuffix(root, "redisproc") {
		t.Errorf("root %s: %v", root, err)
	}
}
