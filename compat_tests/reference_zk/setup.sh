#!/usr/bin/env bash
# Resolves Apache Kafka 3.9 (ZooKeeper mode; the version in pom.xml) and its runtime dependencies from
# Maven Central into compat_tests/reference_zk/lib, for the cluster tests (see ../maven_lib.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../maven_lib.sh" "$here" "Apache Kafka 3.9"
