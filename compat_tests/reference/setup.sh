#!/usr/bin/env bash
# Resolves Apache Kafka's broker (the version in pom.xml) and its runtime dependencies from Maven Central
# into compat_tests/reference/lib, for the differential tests (see ../maven_lib.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../maven_lib.sh" "$here" "Apache Kafka's broker"
