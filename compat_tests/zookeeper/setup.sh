#!/usr/bin/env bash
# Resolves Apache ZooKeeper's server (the version in pom.xml) and its runtime dependencies from Maven
# Central into compat_tests/zookeeper/lib, for the cluster tests (see ../maven_lib.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../maven_lib.sh" "$here" "Apache ZooKeeper"
