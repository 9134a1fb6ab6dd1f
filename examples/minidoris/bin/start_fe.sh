#!/usr/bin/env bash
# Starts minidoris FE like Doris's start_fe.sh.
set -eo pipefail
DORIS_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "${JAVA_HOME:+${JAVA_HOME}/bin/}java" -cp "${DORIS_HOME}/lib/*" org.apache.doris.minife.Main "$@"
