#!/usr/bin/env bash
# Installs the non-Python dependencies of trafka's compatibility tests on a Debian machine (as root):
# kcat (Debian's build links librdkafka 2.0.x), node/npm where missing, and the pinned kafkajs in
# compat_tests/js/node_modules.
# Idempotent, needs no standard input, and prints nothing unless something fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

run_quietly() {
    if ! "$@" >"$log" 2>&1 </dev/null; then
        echo "compat_tests/setup.sh: '$*' failed:" >&2
        cat "$log" >&2
        exit 1
    fi
}

apt_packages=()
command -v kcat >/dev/null 2>&1 || apt_packages+=(kcat)
command -v npm >/dev/null 2>&1 || apt_packages+=(nodejs npm)
if ((${#apt_packages[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    # Refresh the package lists only when apt does not know the packages yet (a fresh image has no lists).
    if ! apt-cache show "${apt_packages[@]}" >/dev/null 2>&1; then
        run_quietly apt-get update
    fi
    run_quietly apt-get install -y --no-install-recommends "${apt_packages[@]}"
fi

# npm ci wipes and reinstalls node_modules: skip it when every locked package is installed at its version.
if ! (cd "$here/js" && node -e '
    const locked = require("./package-lock.json").packages;
    for (const [path, entry] of Object.entries(locked)) {
        if (path && require("./" + path + "/package.json").version !== entry.version) process.exit(1);
    }' >/dev/null 2>&1); then
    (cd "$here/js" && run_quietly npm ci --no-audit --no-fund --loglevel=error)
fi
