#!/usr/bin/env bash
# Builds the release archives into dist/, the way Prometheus exporters ship:
#
#   dist/slot_exporter-<version>.<os>-<arch>.tar.gz
#     slot_exporter-<version>.<os>-<arch>/
#       slot_exporter        the static binary
#       LICENSE
#       slot_exporter.yml    examples/slot_exporter.yml, the binary's default --config.file
#   dist/sha256sums.txt
#
# <version> is `git describe --tags --always --dirty` without the leading v,
# unless VERSION is set. PLATFORMS (default: linux and darwin, amd64 and
# arm64) and GO may be set too.
#
# The archives are reproducible: the build date and every file's time are the
# commit's, owners are 0:0, entries are sorted and gzip stores no name or
# time, so two runs on one commit give the same sha256sums.txt.
set -euo pipefail

cd "$(dirname "$0")/.."

GO=${GO:-go}
NAME=slot_exporter
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
# The main package: the module root today; cmd/slot_exporter if it moves.
MAIN_PKG=.
if [ -f cmd/slot_exporter/main.go ]; then
	MAIN_PKG=./cmd/slot_exporter
fi

if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "release.sh: not a git work tree; the version comes from git describe" >&2
	exit 1
fi
describe=$(git describe --tags --always --dirty)
VERSION=${VERSION:-$describe}
VERSION=${VERSION#v}
REVISION=$(git rev-parse HEAD)
case $describe in *-dirty) REVISION=$REVISION-dirty ;; esac
BRANCH=$(git rev-parse --abbrev-ref HEAD)
EPOCH=$(git log -1 --format=%ct)
# Prometheus's build date layout, from the commit time rather than the
# clock, so that a rebuild gives the same bytes.
BUILD_DATE=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d-%H:%M:%S)

case $VERSION in
*/* | *" "* | "")
	echo "release.sh: version \"$VERSION\" cannot be part of a file name" >&2
	exit 1
	;;
esac

for f in LICENSE examples/$NAME.yml; do
	if [ ! -f "$f" ]; then
		echo "release.sh: $f is missing; every archive carries it" >&2
		exit 1
	fi
done

tar_flags=()
if tar --version 2>/dev/null | grep -q 'GNU tar'; then
	tar_flags=(--sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner)
else
	echo "release.sh: not GNU tar: the archives will work but are not reproducible" >&2
fi

sha256() {
	if command -v sha256sum >/dev/null; then
		sha256sum "$@"
	else
		shasum -a 256 "$@"
	fi
}

pkg=github.com/prometheus/common/version
ldflags="-s -w \
 -X $pkg.Version=$VERSION \
 -X $pkg.Revision=$REVISION \
 -X $pkg.Branch=$BRANCH \
 -X $pkg.BuildDate=$BUILD_DATE"

rm -rf dist
mkdir -p dist
echo "release.sh: $NAME $VERSION (revision $REVISION, branch $BRANCH)" >&2

archives=()
for platform in $PLATFORMS; do
	os=${platform%/*}
	arch=${platform#*/}
	dir=$NAME-$VERSION.$os-$arch
	stage=dist/$dir
	mkdir -p "$stage"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -ldflags "$ldflags" -o "$stage/$NAME" "$MAIN_PKG"
	cp LICENSE "$stage/LICENSE"
	cp "examples/$NAME.yml" "$stage/$NAME.yml"
	chmod 0755 "$stage/$NAME"
	chmod 0644 "$stage/LICENSE" "$stage/$NAME.yml"
	chmod 0755 "$stage"
	tar ${tar_flags[@]+"${tar_flags[@]}"} -C dist -cf - "$dir" | gzip -n -9 >"dist/$dir.tar.gz"

	# The binary for this machine says what it is before it ships.
	if [ "$os/$arch" = "$("$GO" env GOOS)/$("$GO" env GOARCH)" ]; then
		got=$("$stage/$NAME" --version 2>&1 | head -n 1)
		want="$NAME, version $VERSION (branch: $BRANCH, revision: $REVISION)"
		if [ "$got" != "$want" ]; then
			echo "release.sh: $stage/$NAME --version says" >&2
			echo "  $got" >&2
			echo "want" >&2
			echo "  $want" >&2
			exit 1
		fi
	fi
	rm -rf "$stage"
	archives+=("$dir.tar.gz")
done

(cd dist && sha256 "${archives[@]}" >sha256sums.txt)
ls -l dist >&2
