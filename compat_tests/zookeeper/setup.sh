#!/usr/bin/env bash
# Resolves Apache ZooKeeper's server (the version in pom.xml) and its runtime dependencies from Maven
# Central into compat_tests/zookeeper/lib, for the cluster tests. Cached: nothing is fetched while lib/
# matches pom.xml. Idempotent, needs no standard input, and prints nothing unless something fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="$here/lib"
stamp="$lib/.pom.sha256"
wanted="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]]; then
    exit 0
fi
if ! command -v mvn >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
    echo "compat_tests/zookeeper/setup.sh: Apache ZooKeeper needs java and mvn (apt-get install default-jdk-headless maven)" >&2
    exit 1
fi
log="$(mktemp)"
work="$(mktemp -d)"
trap 'rm -rf "$log" "$work"' EXIT
if ! mvn -B -q -f "$here/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$work/lib" >"$log" 2>&1 </dev/null; then
    echo "compat_tests/zookeeper/setup.sh: resolving Apache ZooKeeper from Maven Central failed:" >&2
    cat "$log" >&2
    exit 1
fi
rm -rf "$lib"
mv "$work/lib" "$lib"
echo "$wanted" >"$stamp"
