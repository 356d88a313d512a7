// Package buildinfo fills in the version of a binary built without the
// release's -ldflags: `go build`, `go install` and `go run` leave the
// variables of github.com/prometheus/common/version empty, so --version,
// slot_exporter_build_info and the landing page would say version="" and
// revision=unknown. The Go toolchain records the module version and the VCS
// state in the binary anyway; this package reads them from there.
package buildinfo

import (
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/common/version"
)

// Info is what a binary's build information tells about its version.
// Branch is not among it: Go does not record the branch, so it stays empty
// unless -ldflags set it.
type Info struct {
	Version   string // "0.2.0", "0.1.1-0.20261130120000-abcdef123456+dirty", or "devel"
	Revision  string // the full commit, with "-dirty" for uncommitted changes
	BuildDate string // the commit time, as 20060102-15:04:05 in UTC, like Prometheus's builds
}

// Init sets each of version.Version, version.Revision and
// version.BuildDate that -ldflags left empty from the binary's build
// information. Call it first thing in main, before anything prints or
// registers the version (kingpin's --version, the build_info collector).
func Init() {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fill(FromBuildInfo(bi))
}

// fill sets only the empty fields: a release build's -ldflags win.
func fill(i Info) {
	setIfEmpty(&version.Version, i.Version)
	setIfEmpty(&version.Revision, i.Revision)
	setIfEmpty(&version.BuildDate, i.BuildDate)
}

func setIfEmpty(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}

// buildDateLayout is how Prometheus's release tooling writes build dates.
const buildDateLayout = "20060102-15:04:05"

// pseudoVersion matches the tail of a Go pseudo-version
// (v0.0.0-20261130120000-abcdef123456, v0.1.1-0.20261130120000-abcdef123456,
// v0.2.0-rc.1.0.20261130120000-abcdef123456), optionally +dirty.
var pseudoVersion = regexp.MustCompile(`[-.](\d{14})-([0-9a-f]{12})(\+dirty)?$`)

// FromBuildInfo maps build information to version fields. A nil bi, or one
// from a build that recorded nothing, gives what is known: at least the
// version "devel".
func FromBuildInfo(bi *debug.BuildInfo) Info {
	if bi == nil {
		return Info{}
	}
	var i Info
	mainVersion := bi.Main.Version
	if mainVersion == "" || mainVersion == "(devel)" {
		// go run, -buildvcs=false, or a tree without VCS.
		i.Version = "devel"
	} else {
		i.Version = strings.TrimPrefix(mainVersion, "v")
	}

	var revision, vcsTime string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if t, err := time.Parse(time.RFC3339, vcsTime); err == nil {
		i.BuildDate = t.UTC().Format(buildDateLayout)
	}

	// `go install module@commit` records no vcs.* settings, but its
	// pseudo-version carries the commit time and a revision prefix.
	if m := pseudoVersion.FindStringSubmatch(mainVersion); m != nil {
		if revision == "" {
			revision = m[2]
			modified = modified || m[3] != ""
		}
		if i.BuildDate == "" {
			if t, err := time.Parse("20060102150405", m[1]); err == nil {
				i.BuildDate = t.Format(buildDateLayout)
			}
		}
	}
	if revision != "" && modified {
		revision += "-dirty"
	}
	i.Revision = revision
	return i
}
