// Command testreport reads `go test -json` on stdin and writes what a plain
// `go test` would have written (a line per package, the output of the tests
// that failed, build errors, panics and race reports outside a test), then
// the slowest tests and a count:
//
//	go test -race -json ./... 2>&1 | go run ./tools/testreport
//
// It exits 1 if a test or a package failed, a package did not build, or it
// read no test event at all; lines that are not JSON (go's own errors) are
// passed through as they are.
package main

import (
	"fmt"
	"os"
	"strconv"
)

func main() {
	slowest := 10
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 0 || len(os.Args) > 2 {
			fmt.Fprintln(os.Stderr, "usage: go test -json ... | testreport [how many of the slowest tests to list, default 10]")
			os.Exit(2)
		}
		slowest = n
	}
	r := newReport(os.Stdout, slowest)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	if !r.summary() {
		os.Exit(1)
	}
}
