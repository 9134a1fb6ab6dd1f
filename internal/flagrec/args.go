package flagrec

import "strings"

// driverFlags is what a record's arguments say, read as the driver reads
// them: the last -march, -mcpu and -mtune; what was passed on to cc1
// (clang's -Xclang, or a cc1 record's own arguments); what was passed to
// the assembler; atomics, LTO and PGO.
type driverFlags struct {
	march, mcpu, mtune string
	outline            string // "on", "off" or "" (the compiler's default)
	lto, pgo           string
	// cc1 are the arguments cc1 was given beyond the driver's own, in
	// order: -Xclang values, or the whole argument list of a cc1 record.
	cc1 []string
	// asm are the -march= and -mcpu= the assembler was given (-Wa,
	// -Xassembler): they govern assembly sources only, never the code the
	// compiler makes.
	asm []string
}

// separateValue are the driver options, GCC's and clang's (and cc1's, for
// a cc1 record), whose value is the next argument: that argument belongs
// to the option and is never read as a flag of its own (an output named
// "-march=armv9-a" is a file name).
var separateValue = map[string]bool{
	"-o": true, "-x": true, "-I": true, "-D": true, "-U": true, "-L": true, "-l": true, "-B": true,
	"-T": true, "-u": true, "-e": true, "-z": true, "-G": true,
	"-include": true, "-imacros": true, "-idirafter": true, "-iprefix": true, "-iwithprefix": true,
	"-iwithprefixbefore": true, "-isystem": true, "-isystem-after": true, "-isysroot": true, "-iquote": true,
	"-imultilib": true, "-imultiarch": true, "-ivfsoverlay": true, "-include-pch": true, "--sysroot": true,
	"-MF": true, "-MT": true, "-MQ": true, "-MJ": true, "-dependency-file": true,
	"-Xlinker": true, "-Xpreprocessor": true, "-mllvm": true, "-Xanalyzer": true,
	"-Xopenmp-target": true, "-Xcuda-fatbinary": true, "-Xcuda-ptxas": true, "-Xoffload-linker": true,
	"-target": true, "-arch": true, "-aux-info": true, "--param": true,
	"-dumpbase": true, "-dumpbase-ext": true, "-dumpdir": true, "-auxbase": true, "-auxbase-strip": true,
	"-main-file-name": true, "-resource-dir": true, "-triple": true, "-target-abi": true,
	"-serialize-diagnostic-file": true, "-working-directory": true,
}

// readArgs reads a record's arguments. In a clang record, -Xclang's value
// (and, in a record that is itself a cc1 command line, every argument)
// goes to cc1, where -target-feature and -target-cpu are read; -Wa, and
// -Xassembler's -march= and -mcpu= go to the assembler; -Wl, -Wp,
// -Xlinker, -mllvm and every option with a separate value keep their
// values to themselves; after "--" come only inputs.
func readArgs(r Record) driverFlags {
	var f driverFlags
	args := r.Args
	cc1Record := r.Dialect == "clang" && len(args) > 0 && args[0] == "-cc1"
	if cc1Record {
		f.cc1 = args[1:]
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--":
			return f
		case a == "-Xclang":
			f.cc1 = append(f.cc1, next())
		case strings.HasPrefix(a, "-Xclang="):
			f.cc1 = append(f.cc1, strings.TrimPrefix(a, "-Xclang="))
		case a == "-Xassembler":
			f.assembler(next())
		case strings.HasPrefix(a, "-Wa,"):
			for _, v := range strings.Split(strings.TrimPrefix(a, "-Wa,"), ",") {
				f.assembler(v)
			}
		case r.Dialect == "clang" && (a == "-target-feature" || a == "-target-cpu" || a == "-tune-cpu"):
			// cc1 options: only a cc1 command line (or a forged driver
			// line, which the driver would refuse) has them bare.
			if v := next(); !cc1Record {
				f.cc1 = append(f.cc1, a, v)
			}
		case separateValue[a] || strings.HasPrefix(a, "-Xarch_"):
			next()
		default:
			f.driverFlag(a)
		}
	}
	return f
}

// assembler keeps an assembler option that names an architecture.
func (f *driverFlags) assembler(v string) {
	if strings.HasPrefix(v, "-march=") || strings.HasPrefix(v, "-mcpu=") {
		f.asm = append(f.asm, v)
	}
}

// driverFlag reads one driver argument that stands alone.
func (f *driverFlags) driverFlag(a string) {
	switch {
	case strings.HasPrefix(a, "-march="):
		f.march = strings.TrimPrefix(a, "-march=")
	case strings.HasPrefix(a, "-mcpu="):
		f.mcpu = strings.TrimPrefix(a, "-mcpu=")
	case strings.HasPrefix(a, "-mtune="):
		f.mtune = strings.TrimPrefix(a, "-mtune=")
	case a == "-moutline-atomics":
		f.outline = "on"
	case a == "-mno-outline-atomics":
		f.outline = "off"
	case a == "-flto" || a == "-flto=full":
		f.lto = "full"
	case a == "-flto=thin":
		f.lto = "thin"
	case strings.HasPrefix(a, "-flto="):
		// GCC's -flto=auto, -flto=jobserver, -flto=N: full LTO, in parallel.
		f.lto = "full"
	case a == "-fno-lto":
		f.lto = ""
	case a == "-fprofile-use" || strings.HasPrefix(a, "-fprofile-use=") || a == "-fprofile-instr-use" || strings.HasPrefix(a, "-fprofile-instr-use="):
		f.pgo = "use"
	case a == "-fprofile-generate" || strings.HasPrefix(a, "-fprofile-generate=") || a == "-fprofile-instr-generate" || strings.HasPrefix(a, "-fprofile-instr-generate="):
		f.pgo = "generate"
	}
}
