package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// buildTimeout bounds one BuildBinaries: a cold module cache builds the
// exporter in about a minute on a slow machine.
const buildTimeout = 5 * time.Minute

// Module is the product's module path: the module whose binaries
// BuildBinaries builds.
const Module = "github.com/slotexporter/slot_exporter"

// BuildBinaries builds main packages of the product module (paths relative
// to its root, such as "." or "./cmd/slotsim") into dir with one `go build`,
// as a user builds them: cgo off, and no race detector, since they are the
// system under test, not the test. It returns the binaries' paths in the
// order of pkgs. The root is the nearest directory above the working
// directory whose go.mod declares Module: the test-only modules nested in
// the tree (alerts, e2e) build the binary with the product's own go.mod,
// not with the versions their heavier dependencies would select.
func BuildBinaries(ctx context.Context, dir string, pkgs ...string) ([]string, error) {
	root, module, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	goCmd, err := goTool()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("go build %s timed out after %s:\n%s", strings.Join(pkgs, " "), buildTimeout, out)
		}
		return nil, fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	bins := make([]string, len(pkgs))
	for i, p := range pkgs {
		// go build -o dir/ names a binary after the last element of its
		// import path; "." is the module itself.
		name := path.Base(p)
		if p == "." {
			name = path.Base(module)
		}
		bins[i] = filepath.Join(dir, name)
		if _, err := os.Stat(bins[i]); err != nil {
			return nil, fmt.Errorf("go build did not produce %s: %v", bins[i], err)
		}
	}
	return bins, nil
}

// moduleRoot finds the directory of the nearest go.mod above the working
// directory that declares Module, passing over nested modules' go.mod.
func moduleRoot() (root, module string, err error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			module = ""
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					module = strings.Trim(strings.TrimSpace(m), `"`)
					break
				}
			}
			f.Close()
			if module == Module {
				return dir, module, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", errors.New("no go.mod of " + Module + " above the working directory: run from inside its tree")
		}
		dir = parent
	}
}

// goTool finds the go command: on PATH, or the one of the toolchain the
// caller was built with.
func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no go command on PATH nor in GOROOT (%s)", p)
	}
	return p, nil
}
