#!/usr/bin/env bash
# Usage: setup.sh [BROKER_VERSION ...]
# From Maven Central, for the tests of `trafka --kafka-version` (compat_tests/test_kafka_versions.py):
# - the kafka-clients jar of every Apache Kafka release pom.xml lists, copied into
#   compat_tests/kafka_versions/lib: the source of the table of each release's API versions;
# - Apache Kafka's broker of each BROKER_VERSION (default: the ones the differential test starts), with its
#   runtime dependencies, into compat_tests/kafka_versions/brokers/VERSION/lib (see ../maven_lib.sh).
# Nothing is committed from either. Maven's local repository (~/.m2) caches the downloads, and a folder is
# redone only when what it is made from changes. Idempotent, needs no standard input, prints nothing unless
# something fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
central="https://repo.maven.apache.org/maven2/"
# The brokers compat_tests/test_kafka_versions.py starts besides compat_tests/reference(_zk)'s 4.4 and 3.9.
brokers=("$@")
((${#brokers[@]})) || brokers=(2.8.2)
log="$(mktemp)"
work="$(mktemp -d)"
trap 'rm -rf "$log" "$work"' EXIT

fail() {
    echo "compat_tests/kafka_versions/setup.sh: $*" >&2
    exit 1
}

lib="$here/lib"
stamp="$(sha256sum "$here/pom.xml" | awk '{print $1}')"
if ! [[ -f "$lib/.pom.sha256" && "$(cat "$lib/.pom.sha256")" == "$stamp" ]]; then
    command -v mvn >/dev/null 2>&1 || fail "Maven is missing: run compat_tests/setup.sh"
    copy=(mvn --batch-mode --quiet -Dstyle.color=never -f "$here/pom.xml" dependency:copy
          -DoutputDirectory="$work/lib")
    # Everything may already be in Maven's local repository: then no network is needed.
    if ! "${copy[@]}" --offline >"$log" 2>&1 </dev/null; then
        if command -v curl >/dev/null 2>&1 && ! curl --silent --show-error --head --max-time 20 --output /dev/null "$central" >"$log" 2>&1; then
            cat "$log" >&2
            fail "Maven Central ($central) is unreachable, and the kafka-clients jars are not in ~/.m2"
        fi
        if ! timeout 900 "${copy[@]}" --strict-checksums >"$log" 2>&1 </dev/null; then
            cat "$log" >&2
            fail "copying the kafka-clients jars from Maven Central ('mvn dependency:copy' on $here/pom.xml) failed"
        fi
    fi
    echo "$stamp" >"$work/lib/.pom.sha256"
    rm -rf "$lib"
    mv "$work/lib" "$lib"
fi

for version in "${brokers[@]}"; do
    [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "$version: expected a release, X.Y.Z"
    # Kafka was built for Scala 2.13 from 2.4 on; the releases before, for 2.12 (and older ones).
    scala=2.13
    managed=""
    if [[ "$version" =~ ^2\.[0-3]\. ]]; then
        scala=2.12
        # ZooKeeper 3.4's client cannot connect on Java 14 and later (it reads a host name out of the address's
        # text, which Java 14 changed): these brokers get 3.5.9's client, the one Kafka 2.8 ships.
        managed="
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.apache.zookeeper</groupId>
        <artifactId>zookeeper</artifactId>
        <version>3.5.9</version>
      </dependency>
    </dependencies>
  </dependencyManagement>"
    fi
    dir="$here/brokers/$version"
    mkdir -p "$dir"
    pom="<?xml version=\"1.0\" encoding=\"UTF-8\"?>
<!-- Written by compat_tests/kafka_versions/setup.sh: Apache Kafka $version's broker, resolved into lib/. -->
<project xmlns=\"http://maven.apache.org/POM/4.0.0\">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.trafka.compat</groupId>
  <artifactId>kafka-$version</artifactId>
  <version>1</version>
  <packaging>pom</packaging>$managed
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_$scala</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
</project>"
    [[ -f "$dir/pom.xml" && "$(cat "$dir/pom.xml")" == "$pom" ]] || printf '%s\n' "$pom" >"$dir/pom.xml"
    bash "$here/../maven_lib.sh" "$dir" "Apache Kafka $version"
done
