#!/usr/bin/env bash
# Usage: maven_lib.sh DIR WHAT
# Resolves the dependencies DIR/pom.xml names (WHAT says what they are, for messages) from Maven Central
# into DIR/lib, for the JVM pieces of the tests (not committed). Maven's local repository (~/.m2) caches
# the downloads, and lib/ is redone only when pom.xml changes. Installs Maven from Debian where `mvn` is
# missing (as root). Idempotent, needs no standard input, prints nothing unless something fails, and says
# whether a JDK, Maven or Maven Central is what is missing.
set -euo pipefail

dir="$(cd "$1" && pwd)"
what="$2"
lib="$dir/lib"
name="compat_tests/$(basename "$dir")/setup.sh"
central="https://repo.maven.apache.org/maven2/"
log="$(mktemp)"
work="$(mktemp -d)"
trap 'rm -rf "$log" "$work"' EXIT

fail() {
    echo "$name: $*" >&2
    exit 1
}

stamp="$(sha256sum "$dir/pom.xml" | awk '{print $1}')"
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

copy_dependencies=(mvn --batch-mode --quiet -Dstyle.color=never -f "$dir/pom.xml"
                   dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$work/lib")
# Everything may already be in Maven's local repository: then no network is needed.
if ! "${copy_dependencies[@]}" --offline >"$log" 2>&1 </dev/null; then
    # A quick probe, so that an unreachable Maven Central is named as such instead of stalling Maven.
    if command -v curl >/dev/null 2>&1 && ! curl --silent --show-error --head --max-time 20 --output /dev/null "$central" >"$log" 2>&1; then
        cat "$log" >&2
        fail "Maven Central ($central) is unreachable, and $what is not in ~/.m2"
    fi
    if ! timeout 900 "${copy_dependencies[@]}" --strict-checksums >"$log" 2>&1 </dev/null; then
        cat "$log" >&2
        fail "resolving $what from Maven Central ('mvn dependency:copy-dependencies' on $dir/pom.xml) failed or took over 15 minutes"
    fi
fi
echo "$stamp" >"$work/lib/.pom.sha256"
rm -rf "$lib"
mv "$work/lib" "$lib"
