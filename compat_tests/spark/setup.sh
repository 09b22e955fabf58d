#!/usr/bin/env bash
# Resolves the JVM side of the PySpark tests: Spark's Kafka connector (spark-sql-kafka-0-10) for the
# Spark version in pom.xml, with its kafka-clients and the rest it needs beyond pyspark's own jars, from
# Maven Central into compat_tests/spark/lib (not committed). Maven's local repository (~/.m2) caches
# the downloads; lib/ is redone only when pom.xml changes. Installs Maven from Debian where `mvn` is
# missing (as root). Idempotent, needs no standard input, prints nothing unless something fails, and
# says whether a JDK, Maven or Maven Central is what is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="$here/lib"
central="https://repo.maven.apache.org/maven2/"
log="$(mktemp)"
work="$(mktemp -d)"
trap 'rm -rf "$log" "$work"' EXIT

fail() {
    echo "compat_tests/spark/setup.sh: $*" >&2
    exit 1
}

stamp="$(sha256sum "$here/pom.xml" | awk '{print $1}')"
if [[ -f "$lib/.pom.sha256" && "$(cat "$lib/.pom.sha256")" == "$stamp" ]] && compgen -G "$lib/*.jar" >/dev/null; then
    exit 0
fi

command -v java >/dev/null 2>&1 || fail "no JDK: 'java' is not on PATH (install one, e.g. apt-get install default-jdk-headless)"
if ! command -v mvn >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show maven >/dev/null 2>&1; then
        apt-get update >"$log" 2>&1 </dev/null || { cat "$log" >&2; fail "'apt-get update' failed"; }
    fi
    apt-get install -y --no-install-recommends maven >"$log" 2>&1 </dev/null \
        || { cat "$log" >&2; fail "Maven is missing and 'apt-get install maven' failed"; }
fi

copy_dependencies=(mvn --batch-mode --quiet -Dstyle.color=never -f "$here/pom.xml"
                   dependency:copy-dependencies -DoutputDirectory="$work/lib")
# Everything may already be in Maven's local repository: then no network is needed.
if ! "${copy_dependencies[@]}" --offline >"$log" 2>&1 </dev/null; then
    # A quick probe, so that an unreachable Maven Central is named as such instead of stalling Maven.
    if command -v curl >/dev/null 2>&1 && ! curl --silent --show-error --head --max-time 20 --output /dev/null "$central" >"$log" 2>&1; then
        cat "$log" >&2
        fail "Maven Central ($central) is unreachable, and the connector's jars are not in ~/.m2"
    fi
    if ! timeout 900 "${copy_dependencies[@]}" --strict-checksums >"$log" 2>&1 </dev/null; then
        cat "$log" >&2
        fail "'mvn dependency:copy-dependencies' on compat_tests/spark/pom.xml failed (or took over 15 minutes)"
    fi
fi
echo "$stamp" >"$work/lib/.pom.sha256"
rm -rf "$lib"
mv "$work/lib" "$lib"
