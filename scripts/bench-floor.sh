#!/usr/bin/env bash
# The floor under dorisarm's start-up and scan on this machine: what the Go
# runtime and the packages dorisarm links cost before any of dorisarm's own
# work, timed in the same minutes as dorisarm itself.
#
# It builds three programs beside dorisarm (with go build -overlay, so
# nothing is written into the tree):
#   empty     func main() {}
#   deps      every package cmd/dorisarm links except dorisarm's own, blank
#             imported (their init functions run, nothing else)
#   deps+read deps, then pread(2)s the library's code sections on two
#             goroutines and XORs their words: reading the code, no decoding
# and prints, for each and for `dorisarm version` and `dorisarm scan` of
# the library, the median wall time (random order each round) and the sum of
# package init (GODEBUG=inittrace=1); then llvm-objdump-16 -d's time on the
# library and what 300x of it leaves.
#
# usage: bench-floor.sh DORISARM LIB   (bench-scan.sh runs it on librocksdb)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dorisarm=$1
lib=$2
RUNS=${RUNS:-41}
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
mod=$(go list -m)
go list -deps ./cmd/dorisarm |
    grep -v -e "^${mod}" -e '^main$' -e '^unsafe$' -e '^runtime/cgo$' -e '^vendor/' -e '^internal/' -e '/internal/' -e '/internal$' \
    >"${tmp}/deps.txt"
blank() { sed 's/.*/\t_ "&"/' "${tmp}/deps.txt"; }
mkdir -p "${tmp}/src"
printf 'package main\n\nfunc main() {}\n' >"${tmp}/src/empty.go"
{ printf 'package main\n\nimport (\n'; blank; printf ')\n\nfunc main() {}\n'; } >"${tmp}/src/deps.go"
{
    printf 'package main\n\nimport (\n'
    blank | grep -v -e '"debug/elf"$' -e '"encoding/binary"$' -e '"fmt"$' -e '"os"$' -e '"sync"$' -e '"syscall"$'
    cat <<'EOF'
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// main reads the code sections of os.Args[1] as dorisarm's classifier does
// (pread, 64 KiB at a time into a reused buffer, on two goroutines) and XORs their words.
func main() {
	f, err := os.Open(os.Args[1])
	if err != nil {
		panic(err)
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		panic(err)
	}
	type span struct{ off, n int64 }
	var spans []span
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type != elf.SHT_NOBITS {
			for o := int64(0); o < int64(s.Size); o += 64 << 10 {
				spans = append(spans, span{int64(s.Offset) + o, min(64<<10, int64(s.Size)-o)})
			}
		}
	}
	var wg sync.WaitGroup
	sums := make([]uint32, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			var x uint32
			for i := w; i < len(spans); i += 2 {
				b := buf[:spans[i].n]
				if _, err := syscall.Pread(int(f.Fd()), b, spans[i].off); err != nil {
					panic(err)
				}
				for j := 0; j+4 <= len(b); j += 4 {
					x ^= binary.LittleEndian.Uint32(b[j:])
				}
			}
			sums[w] = x
		}()
	}
	wg.Wait()
	fmt.Println(sums[0] ^ sums[1])
}
EOF
} >"${tmp}/src/read.go"
overlay="${tmp}/overlay.json"
{
    printf '{"Replace":{'
    sep=
    for p in empty deps read; do
        printf '%s"%s/cmd/dorisarm-floor-%s/main.go":"%s/src/%s.go"' "${sep}" "$(pwd)" "${p}" "${tmp}" "${p}"
        sep=,
    done
    printf '}}\n'
} >"${overlay}"
mkdir -p "${tmp}/bin"
for p in empty deps read; do
    CGO_ENABLED=0 go build -overlay "${overlay}" -o "${tmp}/bin/${p}.linked" "./cmd/dorisarm-floor-${p}"
    # Timed as installed copies, as bench-scan.sh times dorisarm.
    install -m 0755 "${tmp}/bin/${p}.linked" "${tmp}/bin/${p}"
done
echo
echo "floor: $(wc -l <"${tmp}/deps.txt") packages linked by cmd/dorisarm besides its own, $(du -m "${tmp}/bin/deps" | cut -f1) MB as a do-nothing binary"
python3 scripts/bench-floor.py "${RUNS}" "${tmp}/bin" "${dorisarm}" "${lib}"
