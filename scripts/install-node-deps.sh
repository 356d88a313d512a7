#!/usr/bin/env bash
# Installs the npm libraries the library tests drive (examples/libraries/node)
# from the checked-in package-lock.json, with `npm ci`, when node_modules is
# missing or was installed from another lockfile. Needs node >= 18 and npm.
set -euo pipefail

dir="$(cd "$(dirname "$0")/.." && pwd)/examples/libraries/node"
stamp="$dir/node_modules/.installed-from-lock.sha256"

for tool in node npm; do
	if ! command -v "$tool" >/dev/null; then
		echo "install-node-deps: $tool not found; install Node.js 18 or later with npm (Debian: apt-get install -y nodejs npm)" >&2
		exit 1
	fi
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 18 ]; then
	echo "install-node-deps: node $(node --version) is too old; the libraries need 18 or later" >&2
	exit 1
fi

want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi

echo "install-node-deps: npm ci in examples/libraries/node" >&2
# .npmrc there keeps registry host names out of the lockfile; npm ci never
# rewrites it, and fails if it disagrees with package.json.
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" >"$stamp"
