// Command gen writes the generated manifests of deploy/kubernetes: the
// PrometheusRule from the alert rules and the Grafana dashboard ConfigMaps.
// `go generate` runs it from deploy/kubernetes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/slotexporter/slot_exporter/deploy/kubernetes"
)

func main() {
	root := flag.String("root", "../..", "the repository root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	files, err := kubernetes.Render(root)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		path := filepath.Join(root, kubernetes.ManifestDir, n)
		if err := os.WriteFile(path, files[n], 0o644); err != nil {
			return err
		}
		fmt.Printf("wrote %s (%d bytes)\n", filepath.ToSlash(filepath.Join(kubernetes.ManifestDir, n)), len(files[n]))
	}
	return nil
}
