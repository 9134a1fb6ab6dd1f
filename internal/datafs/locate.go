package datafs

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/dorisarm/dorisarm"
	"github.com/dorisarm/dorisarm/internal/fault"
)

// MatrixFile is the default matrix's name in a checkout.
const MatrixFile = "matrix.yaml"

// Locator finds the data a command uses: the matrix given (--matrix), else
// matrix.yaml in the working directory (a checkout), else the built-in
// copy; every other default file beside the matrix when it is there, else
// its built-in copy.
type Locator struct {
	// Matrix is --matrix ("" : look for one).
	Matrix string
	// CacheDir is where the built-in sample is written out.
	CacheDir string
}

// MatrixPath is the matrix in use.
func (l Locator) MatrixPath() string {
	if l.Matrix != "" {
		return l.Matrix
	}
	if _, err := os.Stat(MatrixFile); err == nil {
		return MatrixFile
	}
	return Embedded(MatrixFile)
}

// Dir is the matrix's directory.
func (l Locator) Dir() string { return Dir(l.MatrixPath()) }

// File is a default data file or directory, rel a slash path from the
// repository root: beside the matrix when it is there, else built in.
func (l Locator) File(rel string) string {
	if beside := Join(l.Dir(), rel); Exists(beside) {
		return beside
	}
	return Embedded(rel)
}

// Recipe is the file of the recipe called name.
func (l Locator) Recipe(name string) string { return l.File("recipes/" + name + ".yaml") }

// SampleTree is the bundled sample's directory on disk: the checkout's
// beside the matrix, else the built-in copy written once under CacheDir
// (builds copy the tree; nothing is written into it).
func (l Locator) SampleTree() (string, error) {
	if d := l.File(dorisarm.Sample); !IsEmbedded(d) {
		return d, nil
	}
	return WriteTree(dorisarm.Sample, filepath.Join(l.CacheDir, "sample"))
}

// Item is one default data file or patch series and where it comes from.
type Item struct {
	Name    string `json:"name"` // its path in a checkout: matrix.yaml, recipes/doris.yaml, patches
	Path    string `json:"path"` // the file read: embedded:<name> for the built-in copy
	SHA256  string `json:"sha256"`
	Patches *int   `json:"patches,omitempty"` // for a series: how many
}

// Info says which data the commands use. A series' digest is sha256 of its
// "<component>/<file> <sha256>" lines (SeriesDigest).
type Info struct {
	Source  string `json:"source"` // embedded, files or mixed
	Matrix  Item   `json:"matrix"`
	Recipes []Item `json:"recipes"`
	Patches []Item `json:"patches"`
	Sample  string `json:"sample"` // the bundled sample tree
}

// Info digests the data l finds.
func (l Locator) Info() (*Info, error) {
	d := &Info{}
	embedded, files := 0, 0
	item := func(name, p string, series bool) (Item, error) {
		it := Item{Name: name, Path: p}
		var err error
		if series {
			var n int
			it.SHA256, n, err = SeriesDigest(p)
			it.Patches = &n
		} else {
			it.SHA256, err = FileDigest(p)
		}
		if IsEmbedded(p) {
			embedded++
		} else {
			files++
		}
		return it, err
	}
	mp := l.MatrixPath()
	var err error
	if d.Matrix, err = item(path.Base(filepath.ToSlash(mp)), mp, false); err != nil {
		return nil, err
	}
	if IsEmbedded(mp) {
		d.Matrix.Name = MatrixFile
	}
	names, err := fs.Glob(dorisarm.Data(), "recipes/*")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		it, err := item(n, l.File(n), false)
		if err != nil {
			return nil, err
		}
		d.Recipes = append(d.Recipes, it)
	}
	for _, n := range dorisarm.PatchDirs {
		it, err := item(n, l.File(n), true)
		if err != nil {
			return nil, err
		}
		d.Patches = append(d.Patches, it)
	}
	d.Sample = l.File(dorisarm.Sample)
	switch {
	case files == 0:
		d.Source = "embedded"
	case embedded == 0:
		d.Source = "files"
	default:
		d.Source = "mixed"
	}
	return d, nil
}

// Writable refuses to write the built-in copy: how says what to do instead
// (e.g. "pass --patches DIR").
func Writable(name, how string) error {
	if IsEmbedded(name) {
		return fault.Inputf("%s is the copy built into dorisarm and cannot be changed: run in a checkout or %s", name, how)
	}
	return nil
}
