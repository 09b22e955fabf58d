#!/usr/bin/env bash
# Installs the non-Python dependencies of trafka's compatibility tests on a Debian machine (as root):
# kcat (Debian's build links librdkafka 2.0.x), Debian's zookeeper package, node/npm where missing, the pinned kafkajs in
# compat_tests/js/node_modules, a JDK where javac is missing, Maven where mvn is missing, and from Maven
# Central: Apache Kafka's Java client (kafka-clients 4.3.0 with its compression and logging libraries,
# and Gson for the driver's JSON) in compat_tests/java/lib, Apache Kafka's broker in
# compat_tests/reference/lib (the reference of the differential tests), the kafka-clients jar of every Kafka
# release from 2.0 on and Apache Kafka 2.8's broker in compat_tests/kafka_versions (--kafka-version's tests) and
# Spark's Kafka connector in compat_tests/spark/lib.
# Idempotent, needs no standard input, and prints nothing unless something fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log="$(mktemp)"
work="$(mktemp -d)"
trap 'rm -rf "$log" "$work"' EXIT

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
command -v javac >/dev/null 2>&1 || apt_packages+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || apt_packages+=(maven)
# Debian's ZooKeeper: where an installed trafka's `trafka cluster` finds it (compat_tests/test_install.py).
[ -f /usr/share/java/zookeeper.jar ] || apt_packages+=(zookeeper)
# The nemesis tests' test network (compat_tests/netns.py): namespaces and veths (iproute2), faults (nftables).
command -v ip >/dev/null 2>&1 || apt_packages+=(iproute2)
command -v nft >/dev/null 2>&1 || apt_packages+=(nftables)
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

# Apache Kafka's Java client and the driver's libraries from Maven Central (java/pom.xml, checksums
# enforced), each jar then checked against the sha256 pinned in java/jars.sha256; nothing is fetched
# while every pinned jar is present and intact.
java_lib="$here/java/lib"
if ! (cd "$java_lib" && sha256sum --check --status --strict "$here/java/jars.sha256") 2>/dev/null; then
    run_quietly mvn -B -q -C -f "$here/java/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$work/lib"
    if ! (cd "$work/lib" && sha256sum --check --strict "$here/java/jars.sha256" >"$log" 2>&1); then
        echo "compat_tests/setup.sh: the Java client's jars from Maven Central are not the pinned ones:" >&2
        cat "$log" >&2
        exit 1
    fi
    rm -rf "$java_lib"
    mv "$work/lib" "$java_lib"
fi
bash "$here/reference/setup.sh"
bash "$here/reference_zk/setup.sh"
bash "$here/kafka_versions/setup.sh"
bash "$here/spark/setup.sh"
bash "$here/zookeeper/setup.sh"
