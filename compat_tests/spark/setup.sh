#!/usr/bin/env bash
# Resolves the JVM side of the PySpark tests: Spark's Kafka connector (spark-sql-kafka-0-10) for the
# Spark version in pom.xml, with its kafka-clients and the rest it needs beyond pyspark's own jars, from
# Maven Central into compat_tests/spark/lib (see ../maven_lib.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../maven_lib.sh" "$here" "Spark's Kafka connector"
