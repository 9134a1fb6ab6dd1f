// Command gen builds internal/isa/groups.bin: for the SVE and SME encoding
// groups (whole 1/16 and 1/32 slices of the encoding space, most of which is
// unallocated) a table that says, for each value of the key bits, which
// feature a word needs, or that the encoding is unallocated. The ground
// truth is llvm-mc-16's disassembler: words are sampled for every key and
// decoded under feature sets that add one extension at a time.
//
//	go run ./internal/isa/gen -samples 6 -o internal/isa/groups.bin   (98 min on 2 cores)
//
// It prints the share of held-out words the table gets right. Each table is
// stored as isa.PackGroup packs it (distinct blocks and an index), which the
// classifier uses where it lies in the binary. A new table changes
// groupsDigest in internal/isa/groups_test.go, which gen prints.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"github.com/dorisarm/dorisarm/internal/isa"
)

// group describes one encoding group and its key.
type group struct {
	name        string
	mask, value uint32   // membership
	keyBits     [][2]int // [hi, lo] bit ranges forming the key
	base        string   // -mattr that decodes the plain extension
	classes     []class  // refinements, in order; the first that newly decodes a word wins
	baseClass   string
}

type class struct{ name, mattr string }

var groups = []group{
	{
		name: "sve", mask: 0x1e000000, value: 0x04000000,
		// Bit 9 is in the key: it alone tells SVE's CNTP Xd, Pg, Pn.T
		// (bit 9 = 0) from SVE2.1's CNTP Xd, PNn.T, vlx (bit 9 = 1).
		keyBits: [][2]int{{31, 29}, {24, 9}, {4, 4}},
		base:    "+sve", baseClass: "sve",
		classes: []class{
			{"sve2", "+sve,+sve2"},
			{"sve2-aes", "+sve,+sve2,+sve2-aes"}, {"sve2-bitperm", "+sve,+sve2,+sve2-bitperm"},
			{"sve2-sha3", "+sve,+sve2,+sve2-sha3"}, {"sve2-sm4", "+sve,+sve2,+sve2-sm4"},
			{"f32mm", "+sve,+f32mm"}, {"f64mm", "+sve,+f64mm"}, {"i8mm", "+sve,+i8mm"}, {"bf16", "+sve,+bf16"},
			{"sme", "+sve,+sme,+sme-f64f64,+sme-i16i64"},
			// SVE2.1 and SME2 (multi-vector forms, predicate-as-counter
			// registers): allocated in LLVM 16, in no CPU of the matrix.
			{"sve2p1", "+sve,+sve2,+sve2p1"}, {"b16b16", "+sve,+sve2,+sve2p1,+b16b16"},
			{"sme2", "+sve,+sme,+sme2,+sme-f64f64,+sme-i16i64"},
		},
	},
	{
		name: "sme", mask: 0x9e000000, value: 0x80000000,
		// Bit 9 is in the key: it alone tells SME's MOVA (tile to vector)
		// from SME2.1's MOVAZ, which zeroes the slice it reads.
		keyBits: [][2]int{{30, 29}, {24, 9}, {4, 0}},
		base:    "+sme,+sme-f64f64,+sme-i16i64", baseClass: "sme",
		classes: []class{{"sme2", "+sme,+sme2,+sme-f64f64,+sme-i16i64"}, {"sme2p1", "+sme,+sme2,+sme2p1,+sme-f64f64,+sme-i16i64"}},
	},
}

func (g group) keyLen() int {
	n := 0
	for _, r := range g.keyBits {
		n += r[0] - r[1] + 1
	}
	return n
}

// random returns a random word of the group with the given key.
func (g group) random(rng *rand.Rand, k uint32) uint32 {
	w := rng.Uint32()&^g.mask | g.value
	shift := g.keyLen()
	for _, r := range g.keyBits {
		width := r[0] - r[1] + 1
		shift -= width
		bits := (k >> shift) & (1<<width - 1)
		m := uint32(1<<width-1) << r[1]
		w = w&^m | bits<<r[1]
	}
	return w
}

// decode returns the words llvm-mc decodes under mattr.
func decode(words []uint32, mattr string) []uint32 {
	var in bytes.Buffer
	for _, w := range words {
		fmt.Fprintf(&in, "0x%02x 0x%02x 0x%02x 0x%02x\n", w&0xff, w>>8&0xff, w>>16&0xff, w>>24)
	}
	cmd := exec.Command("llvm-mc-16", "--disassemble", "-triple=aarch64", "-show-encoding", "-mattr="+mattr)
	cmd.Stdin = &in
	out, _ := cmd.Output()
	var valid []uint32
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if w, ok := isa.MCEncoding(sc.Text()); ok {
			valid = append(valid, w)
		}
	}
	return valid
}

// chunk is how many words one llvm-mc run decodes; runs go on every CPU.
const chunk = 1 << 18

// decodeAll decodes words under each mattr, the runs spread over the CPUs,
// and returns for each mattr the set of words it decodes.
func decodeAll(words []uint32, mattrs []string) []map[uint32]bool {
	type job struct{ m, lo, hi int }
	jobs := make(chan job)
	type result struct {
		m     int
		valid []uint32
	}
	results := make(chan result)
	var wg sync.WaitGroup
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				results <- result{j.m, decode(words[j.lo:j.hi], mattrs[j.m])}
			}
		}()
	}
	go func() {
		for m := range mattrs {
			for lo := 0; lo < len(words); lo += chunk {
				jobs <- job{m, lo, min(lo+chunk, len(words))}
			}
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	sets := make([]map[uint32]bool, len(mattrs))
	for i := range sets {
		sets[i] = map[uint32]bool{}
	}
	for r := range results {
		for _, w := range r.valid {
			sets[r.m][w] = true
		}
	}
	return sets
}

// label classifies words: "" unallocated, else the class.
func label(g group, words []uint32) map[uint32]string {
	mattrs := []string{g.base}
	for _, c := range g.classes {
		mattrs = append(mattrs, c.mattr)
	}
	sets := decodeAll(words, mattrs)
	out := map[uint32]string{}
	for w := range sets[0] {
		out[w] = g.baseClass
	}
	for i, c := range g.classes {
		for w := range sets[i+1] {
			if _, ok := out[w]; !ok {
				out[w] = c.name
			}
		}
	}
	return out
}

func main() {
	samples := flag.Int("samples", 8, "words sampled per key")
	outFile := flag.String("o", "internal/isa/groups.bin", "output")
	flag.Parse()
	rng := rand.New(rand.NewSource(1))
	var out bytes.Buffer
	out.WriteString("DAGT2\n")
	digest := sha256.New()
	for _, g := range groups {
		n := uint32(1) << g.keyLen()
		words := make([]uint32, 0, int(n)*(*samples+1))
		for k := uint32(0); k < n; k++ {
			for s := 0; s <= *samples; s++ {
				words = append(words, g.random(rng, k))
			}
		}
		lab := label(g, words)
		names := []string{""}
		index := map[string]byte{"": 0}
		table := make([]byte, n)
		var right, held int
		for k := uint32(0); k < n; k++ {
			votes := map[string]int{}
			base := int(k) * (*samples + 1)
			for s := 0; s < *samples; s++ {
				votes[lab[words[base+s]]]++
			}
			best, bestN := "", -1
			for c, v := range votes {
				if v > bestN || v == bestN && c < best {
					best, bestN = c, v
				}
			}
			if _, ok := index[best]; !ok {
				index[best] = byte(len(names))
				names = append(names, best)
			}
			table[k] = index[best]
			// The last sample of each key is held out to measure the table.
			held++
			if lab[words[base+*samples]] == best {
				right++
			}
		}
		fmt.Fprintf(os.Stderr, "%s: %d keys, classes %v, held-out agreement %.3f%%\n", g.name, n, names, 100*float64(right)/float64(held))
		line := fmt.Sprintf("%s %08x %08x %s %s\n", g.name, g.mask, g.value, keySpec(g), strings.Join(names[1:], ","))
		packed, err := isa.PackGroup(table)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", g.name, err)
			os.Exit(1)
		}
		out.WriteString(line)
		out.Write(packed)
		digest.Write([]byte(line))
		digest.Write(table)
	}
	fmt.Fprintf(os.Stderr, "groupsDigest (internal/isa/groups_test.go): %x\n", digest.Sum(nil))
	if err := os.WriteFile(*outFile, out.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func keySpec(g group) string {
	var parts []string
	for _, r := range g.keyBits {
		parts = append(parts, fmt.Sprintf("%d:%d", r[0], r[1]))
	}
	return strings.Join(parts, ",")
}
