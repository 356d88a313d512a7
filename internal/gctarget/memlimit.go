package gctarget

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// LimitShare is the part of the container's memory limit the Go runtime
// is told it may use (its soft limit, GOMEMLIMIT), unless the environment
// sets GOMEMLIMIT. Not all of it: the runtime counts only the memory it
// manages, and the process's RSS also holds the binary, thread stacks and
// freed pages not yet returned, so a soft limit of the whole limit lets
// RSS reach the hard limit and the kernel kill the exporter before the
// collector works harder. 90% leaves that margin.
const LimitShare = 0.9

// cgroupRoot is where the container's memory limit is read from.
const cgroupRoot = "/sys/fs/cgroup"

// ApplyMemoryLimit sets the Go runtime's soft memory limit to LimitShare
// of the container's (cgroup v2 memory.max, or v1 memory.limit_in_bytes)
// unless GOMEMLIMIT is set or there is no limit. It returns the limit in
// force, in bytes (math.MaxInt64: none).
func ApplyMemoryLimit() int64 {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok && v != "" {
		return debug.SetMemoryLimit(-1)
	}
	limit, ok := containerLimit(cgroupRoot)
	if !ok {
		return debug.SetMemoryLimit(-1)
	}
	soft := int64(float64(limit) * LimitShare)
	debug.SetMemoryLimit(soft)
	return soft
}

// containerLimit reads the memory limit of the cgroup the process runs
// in, under root: v2 first, then v1. No file, "max", or v1's "no limit"
// (a page-rounded math.MaxInt64) is no limit.
func containerLimit(root string) (int64, bool) {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// Describe says a limit from ApplyMemoryLimit for the log.
func Describe(limit int64) string {
	if limit == math.MaxInt64 {
		return "none"
	}
	return strconv.FormatInt(limit>>20, 10) + " MiB"
}
