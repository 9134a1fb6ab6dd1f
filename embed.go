// Package dorisarm holds the data dorisarm is built with: the default
// matrix.yaml, recipes/ (with their lock and scan allow files), patches/ and
// the bundled sample tree examples/minidoris. They are embedded here, at the
// module root, because go:embed cannot reach a parent directory; the CLI uses
// them when the working directory (or --matrix's directory) has none.
package dorisarm

import (
	"embed"
	"io/fs"
)

// The sample is listed directory by directory so that what a local build of
// it leaves in the tree (output/, be/build/, thirdparty/src/ … — its
// .gitignore) is never embedded.
//
//go:embed matrix.yaml recipes patches runtimes
//go:embed examples/minidoris/.gitignore examples/minidoris/README.md
//go:embed examples/minidoris/build.sh examples/minidoris/env.sh
//go:embed examples/minidoris/be/src examples/minidoris/bin examples/minidoris/conf
//go:embed examples/minidoris/fe/native examples/minidoris/fe/src
//go:embed examples/minidoris/gensrc/script examples/minidoris/patches
//go:embed examples/minidoris/thirdparty/*.sh examples/minidoris/thirdparty/mirror
//go:embed examples/minidoris/thirdparty/patches examples/minidoris/thirdparty/pkgsrc
var data embed.FS

// Data is the embedded copy, with paths relative to the repository root
// ("matrix.yaml", "recipes/doris.yaml").
func Data() fs.FS { return data }

// Sample is the bundled sample tree's directory in Data.
const Sample = "examples/minidoris"

// PatchDirs are the patch series in Data (a recipe's patches:).
var PatchDirs = []string{"patches", "examples/minidoris/patches"}

// Executables are the files of Data that are executable in the repository:
// embed.FS keeps no file modes, and the sample's scripts must run (and its
// tree digest match the checkout's) once it is written to disk.
var Executables = []string{
	"examples/minidoris/bin/start_be.sh",
	"examples/minidoris/bin/start_fe.sh",
	"examples/minidoris/build.sh",
	"examples/minidoris/thirdparty/build-thirdparty.sh",
	"examples/minidoris/thirdparty/download-thirdparty.sh",
	"examples/minidoris/thirdparty/pack.sh",
	"examples/minidoris/thirdparty/pkgsrc/openssl-sysimport-3.0/import.sh",
	"runtimes/gcc-cxxrt.sh",
}
