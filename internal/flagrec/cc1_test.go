package flagrec

import (
	"strings"
	"testing"
)

// cc1Line is the cc1 command line clang-16's driver runs (clang-16 -###)
// for kunpeng920's -march, with extra target features spliced in after
// the driver's own.
func cc1Line(extra string) string {
	return "/usr/lib/llvm-16/bin/clang -cc1 -triple aarch64-unknown-linux-gnu -emit-obj -disable-free -clear-ast-before-backend -disable-llvm-verifier -discard-value-names -main-file-name a.c -mrelocation-model pic -pic-level 2 -pic-is-pie -mframe-pointer=non-leaf -fmath-errno -ffp-contract=on -fno-rounding-math -mconstructor-aliases -funwind-tables=2 -target-cpu generic -target-feature +neon -target-feature +v8.2a -target-feature +crypto -target-feature +dotprod -target-feature +fp16fml" + extra + " -target-feature +fullfp16 -target-feature +sha2 -target-feature +aes -target-abi aapcs -mllvm -treat-scalable-fixed-error-as-warning -debugger-tuning=gdb -fcoverage-compilation-dir=/tmp/fx -resource-dir /usr/lib/llvm-16/lib/clang/16 -internal-isystem /usr/lib/llvm-16/lib/clang/16/include -internal-isystem /usr/local/include -internal-externc-isystem /usr/include/aarch64-linux-gnu -internal-externc-isystem /include -internal-externc-isystem /usr/include -O2 -fdebug-compilation-dir=/tmp/fx -ferror-limit 19 -fno-signed-char -fgnuc-version=4.2.1 -vectorize-loops -vectorize-slp -target-feature +outline-atomics -target-feature -fmv -faddrsig -D__GCC_HAVE_DWARF2_CFI_ASM=1 -o c.o -x c a.c"
}

// What the driver passes on to cc1 (-Xclang) is attributed as cc1 reads
// it: -target-feature +NAME adds LLVM's feature NAME, -NAME takes it away,
// -target-cpu sets the CPU, whose extensions come with it. The driver
// records are clang-16's, read back with readelf -p .GCC.command.line;
// the cc1 records are the cc1 command lines clang-16 -### prints.
func TestXclangAndCC1(t *testing.T) {
	e := expect(t, load(t), "kunpeng920")
	drv := "/usr/lib/llvm-16/bin/clang --target=aarch64-linux-gnu -O2 -c -frecord-command-line " + kpMarch
	cases := []struct {
		name, rec, verdict string
		detail             []string
	}{
		{"Xclang +sve", drv + " -Xclang -target-feature -Xclang +sve a.c -o r.o", Beyond, []string{"sve", "cc1 -target-feature +sve"}},
		{"Xclang -target-cpu neoverse-v1", drv + " -Xclang -target-cpu -Xclang neoverse-v1 a.c -o r.o", Beyond, []string{"bf16", "i8mm", "rcpc", "sve", "cc1 -target-cpu neoverse-v1"}},
		// clang records -Xclang=V as -Xclang V; a record written with the
		// other spelling means the same.
		{"Xclang= spelling", drv + " -Xclang=-target-feature -Xclang=+sve a.c -o r.o", Beyond, []string{"sve"}},
		{"Xclang +v8.4a raises the level", drv + " -Xclang -target-feature -Xclang +v8.4a a.c -o r.o", Beyond, []string{"rcpc", "flagm"}},
		{"Xclang -dotprod takes the target's dotprod away", drv + " -Xclang -target-feature -Xclang -dotprod a.c -o r.o", Lost, []string{"dotprod"}},
		{"Xclang -crypto leaves aes and sha2 (a bundle)", drv + " -Xclang -target-feature -Xclang -crypto a.c -o r.o", AtTarget, nil},
		{"Xclang -target-cpu tsv110", drv + " -Xclang -target-cpu -Xclang tsv110 a.c -o r.o", AtTarget, nil},
		{"Xclang unknown LLVM feature", drv + " -Xclang -target-feature -Xclang +ccdp a.c -o r.o", Unresolved, []string{"ccdp", "features.yaml"}},
		{"Xclang unknown CPU", drv + " -Xclang -target-cpu -Xclang warp9 a.c -o r.o", Unresolved, []string{"warp9"}},
		{"cc1 record at the target", cc1Line(""), AtTarget, nil},
		{"cc1 record with +sve", cc1Line(" -target-feature +sve"), Beyond, []string{"sve"}},
		{"cc1 record with +rcpc", cc1Line(" -target-feature +rcpc"), Beyond, []string{"rcpc"}},
		{"cc1 record with -target-cpu a later one wins", strings.Replace(cc1Line(""), "-target-abi aapcs", "-target-abi aapcs -target-cpu neoverse-n1", 1), Beyond, []string{"rcpc", "ssbs"}},
	}
	for _, c := range cases {
		r, ok := Parse(c.rec)
		if !ok {
			t.Fatalf("%s: not parsed", c.name)
		}
		res := e.Resolve(r)
		v, d := e.Judge(res)
		if v != c.verdict {
			t.Errorf("%s: %s (%s), want %s", c.name, v, d, c.verdict)
		}
		got := d + " | " + res.Describe()
		for _, w := range c.detail {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
	}
}

// Every name in features.yaml means something the matrix defines.
func TestFeatureNamesResolve(t *testing.T) {
	m := load(t)
	rv := NewResolver(m, "aarch64")
	names, err := loadNames()
	if err != nil {
		t.Fatal(err)
	}
	for compiler, cn := range map[string]compilerNames{"llvm": names.LLVM, "gcc": names.GCC} {
		for n := range cn.Levels {
			if _, err := rv.name(compiler, n); err != nil {
				t.Error(err)
			}
		}
		for n := range cn.Features {
			if _, err := rv.name(compiler, n); err != nil {
				t.Error(err)
			}
		}
	}
	if f, err := rv.name("llvm", "sve2-bitperm"); err != nil || len(f.exts) != 1 {
		t.Errorf("a matrix extension's own name: %+v %v", f, err)
	}
}
