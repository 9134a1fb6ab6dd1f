#!/usr/bin/env bash
# screenshot.sh PAGE.html OUT.png [WIDTH HEIGHT]: render a local page in
# headless Chromium and save what it shows. The flags keep Chromium off the
# network (this machine's is closed) and out of the user's profile.
set -euo pipefail
page=$1 png=$2 width=${3:-1800} height=${4:-4200}
profile=$(mktemp -d)
trap 'rm -rf "${profile}"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="${profile}" --window-size="${width},${height}" \
    --screenshot="$(realpath -m "${png}")" "file://$(realpath "${page}")" >/dev/null 2>&1
test -s "${png}"
