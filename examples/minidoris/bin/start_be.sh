#!/usr/bin/env bash
# Starts minidoris BE in the foreground (--console) like Doris's start_be.sh.
set -eo pipefail
DORIS_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "${DORIS_HOME}/lib/doris_be" --self-test
