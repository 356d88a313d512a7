package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/prometheus/common/version"
)

const rev = "0123456789abcdef0123456789abcdef01234567"

func settings(kv ...string) []debug.BuildSetting {
	var s []debug.BuildSetting
	for i := 0; i+1 < len(kv); i += 2 {
		s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
	}
	return s
}

func TestFromBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{
			name: "go build on a clean tagged commit",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "v0.2.0"},
				Settings: settings("-trimpath", "true", "vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-30T12:34:56Z", "vcs.modified", "false"),
			},
			want: Info{Version: "0.2.0", Revision: rev, BuildDate: "20261130-12:34:56"},
		},
		{
			name: "go build with uncommitted changes after a tag",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "v0.2.1-0.20261130123456-0123456789ab+dirty"},
				Settings: settings("vcs.revision", rev, "vcs.time", "2026-11-30T12:34:56Z", "vcs.modified", "true"),
			},
			want: Info{Version: "0.2.1-0.20261130123456-0123456789ab+dirty", Revision: rev + "-dirty", BuildDate: "20261130-12:34:56"},
		},
		{
			name: "commit time in another zone is written in UTC",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "v0.2.0"},
				Settings: settings("vcs.revision", rev, "vcs.time", "2026-11-30T14:34:56+02:00"),
			},
			want: Info{Version: "0.2.0", Revision: rev, BuildDate: "20261130-12:34:56"},
		},
		{
			name: "go install at a release",
			bi:   &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}},
			want: Info{Version: "0.2.0"},
		},
		{
			name: "go install at a commit: the pseudo-version has the revision prefix and time",
			bi:   &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261130123456-0123456789ab"}},
			want: Info{Version: "0.0.0-20261130123456-0123456789ab", Revision: "0123456789ab", BuildDate: "20261130-12:34:56"},
		},
		{
			name: "pre-release pseudo-version",
			bi:   &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0-rc.1.0.20261130123456-0123456789ab"}},
			want: Info{Version: "0.3.0-rc.1.0.20261130123456-0123456789ab", Revision: "0123456789ab", BuildDate: "20261130-12:34:56"},
		},
		{
			name: "vcs settings win over the pseudo-version",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "v0.0.0-20261130123456-0123456789ab"},
				Settings: settings("vcs.revision", rev, "vcs.time", "2026-12-01T00:00:00Z"),
			},
			want: Info{Version: "0.0.0-20261130123456-0123456789ab", Revision: rev, BuildDate: "20261201-00:00:00"},
		},
		{
			name: "go run or -buildvcs=false",
			bi:   &debug.BuildInfo{Main: debug.Module{Path: "github.com/slotexporter/slot_exporter", Version: "(devel)"}},
			want: Info{Version: "devel"},
		},
		{
			name: "no main module version at all",
			bi:   &debug.BuildInfo{},
			want: Info{Version: "devel"},
		},
		{
			name: "unparsable vcs.time is left out",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "(devel)"},
				Settings: settings("vcs.revision", rev, "vcs.time", "yesterday", "vcs.modified", "true"),
			},
			want: Info{Version: "devel", Revision: rev + "-dirty"},
		},
		{
			name: "a version that only looks like a pseudo-version",
			bi:   &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0-20261130123456-XYZ"}},
			want: Info{Version: "1.0.0-20261130123456-XYZ"},
		},
		{
			name: "no build information",
			bi:   nil,
			want: Info{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromBuildInfo(tc.bi); got != tc.want {
				t.Errorf("FromBuildInfo = %+v\nwant            %+v", got, tc.want)
			}
		})
	}
}

// saveVersion restores the package-level version variables after a test.
func saveVersion(t *testing.T) {
	v, r, b, d := version.Version, version.Revision, version.Branch, version.BuildDate
	t.Cleanup(func() { version.Version, version.Revision, version.Branch, version.BuildDate = v, r, b, d })
}

func TestFillKeepsWhatLdflagsSet(t *testing.T) {
	saveVersion(t)
	version.Version, version.Revision, version.Branch, version.BuildDate = "1.0.0", "", "main", "20260101-00:00:00"
	fill(Info{Version: "devel", Revision: rev, BuildDate: "20261130-12:34:56"})
	if version.Version != "1.0.0" || version.BuildDate != "20260101-00:00:00" || version.Branch != "main" {
		t.Errorf("fill overwrote -ldflags: version %q, build date %q, branch %q", version.Version, version.BuildDate, version.Branch)
	}
	if version.Revision != rev {
		t.Errorf("revision = %q, want the build info's %q", version.Revision, rev)
	}
	if got := version.GetRevision(); got != rev {
		t.Errorf("version.GetRevision() = %q, want %q", got, rev)
	}
}

func TestInitFillsAnUnstampedBuild(t *testing.T) {
	saveVersion(t)
	version.Version, version.Revision, version.BuildDate = "", "", ""
	Init()
	// A test binary has build information but no release version.
	bi, _ := debug.ReadBuildInfo()
	want := FromBuildInfo(bi)
	if version.Version == "" || version.Version != want.Version || version.Revision != want.Revision || version.BuildDate != want.BuildDate {
		t.Errorf("after Init: version %q revision %q date %q, want %+v", version.Version, version.Revision, version.BuildDate, want)
	}
}
