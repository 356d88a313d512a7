#!/usr/bin/env bash
# Lints alerts/slot_exporter.rules.yml with pint (github.com/cloudflare/pint),
# a static Prometheus rule linter, configured by .pint.hcl. pint is built once,
# at a pinned version, into a cache directory ($PINT_CACHE, default
# ~/.cache/slot_exporter/pint-<version>), and reused after that.
#
# Why not `go install github.com/cloudflare/pint/cmd/pint@<version>`: go
# install also reads the module's version list (for deprecation notices), and
# the module proxy refuses that list for this module, so go install fails. The
# script downloads the pinned version with `go mod download` instead, checks
# its hash against the one below (the checksum database has no entry for it
# yet, so nothing else would), and builds it with pint's own go.sum, which
# pins every dependency. A first build takes 2-3 minutes on 2 cores (about
# 1.5 min of CPU, plus downloading ~60 modules); later runs take seconds.
set -euo pipefail

PINT_VERSION=v0.86.0
PINT_SUM='h1:54htp0CAXcS3G56LP03A0D9Kjftj4GnCIl5hF4G2SLs='

cd "$(dirname "$0")/.."
cache="${PINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slot_exporter/pint-$PINT_VERSION}"
bin="$cache/pint"

if [ ! -x "$bin" ]; then
	echo "pint.sh: building pint $PINT_VERSION into $cache" >&2
	mkdir -p "$cache"
	# From the cache directory, outside this module, so that nothing is
	# added to this module's go.sum.
	info=$(GONOSUMDB=github.com/cloudflare/pint \
		go -C "$cache" mod download -json "github.com/cloudflare/pint@$PINT_VERSION")
	field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"$info" | head -n1; }
	err=$(field Error)
	if [ -n "$err" ]; then
		echo "pint.sh: cannot download pint $PINT_VERSION: $err" >&2
		exit 1
	fi
	sum=$(field Sum)
	if [ "$sum" != "$PINT_SUM" ]; then
		echo "pint.sh: pint $PINT_VERSION has hash $sum, want $PINT_SUM: refusing to build it" >&2
		exit 1
	fi
	dir=$(field Dir)
	# Build into a temporary name first, so an interrupted build never leaves
	# a broken binary behind.
	GOFLAGS=-mod=readonly go -C "$dir" build -trimpath -o "$bin.tmp" ./cmd/pint
	mv "$bin.tmp" "$bin"
fi

exec "$bin" --no-color --offline --config .pint.hcl lint alerts/slot_exporter.rules.yml
