# Sourced by the bench and e2e scripts: start_registry runs Debian's
# docker-registry (distribution) on a free loopback port with storage in a
# temporary directory, sets REGISTRY to 127.0.0.1:<port>, and stops it and
# removes the storage when the script exits.
start_registry() {
    local dir port
    dir=$(mktemp -d)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' "${dir}/data" "${port}" >"${dir}/config.yml"
    docker-registry serve "${dir}/config.yml" >/dev/null 2>&1 &
    REGISTRY_PID=$!
    REGISTRY_DIR=${dir}
    trap 'kill ${REGISTRY_PID} 2>/dev/null; rm -rf "${REGISTRY_DIR}"' EXIT
    REGISTRY="127.0.0.1:${port}"
    for _ in $(seq 100); do
        curl -fs "http://${REGISTRY}/v2/" >/dev/null && return 0
        sleep 0.05
    done
    echo "docker-registry did not start on ${REGISTRY}" >&2
    return 1
}
