package flagrec

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/dorisarm/dorisarm/internal/datafile"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

// featuresYAML says what the compilers' own feature names mean in
// matrix.yaml's terms (see the file).
//
//go:embed features.yaml
var featuresYAML []byte

const featuresFile = "internal/flagrec/features.yaml"

// featureNames is features.yaml.
type featureNames struct {
	Schema int           `yaml:"schema"`
	LLVM   compilerNames `yaml:"llvm"`
	GCC    compilerNames `yaml:"gcc"`
}

// compilerNames are one compiler's names: architecture levels, and the
// extensions each feature name enables ([]: none).
type compilerNames struct {
	Levels   map[string]string   `yaml:"levels" shape:"maps a compiler's name to an arch level: v8.2a: armv8.2-a"`
	Features map[string][]string `yaml:"features" shape:"maps a compiler's name to extensions: fullfp16: [fp16]"`
}

var loadNames = sync.OnceValues(func() (*featureNames, error) {
	var n featureNames
	if err := datafile.Decode(featuresFile, featuresYAML, &n); err != nil {
		return nil, err
	}
	if n.Schema != 1 {
		return nil, fmt.Errorf("%s: schema %d, this dorisarm reads schema 1", featuresFile, n.Schema)
	}
	return &n, nil
})

// feature is what one compiler feature name means: an architecture
// level, or extensions (none for a name without instructions).
type feature struct {
	level string
	exts  []string
}

// name says what a compiler ("llvm" or "gcc") means by a feature name.
func (rv *Resolver) name(compiler, n string) (feature, error) {
	names, err := loadNames()
	if err != nil {
		return feature{}, err
	}
	cn := names.LLVM
	if compiler == "gcc" {
		cn = names.GCC
	}
	if l, ok := cn.Levels[n]; ok {
		if al, ok := rv.m.ArchLevels[l]; !ok || al.ISA != rv.isa {
			return feature{}, fmt.Errorf("%s maps %s's %q to the level %q, which matrix.yaml does not define for %s", featuresFile, compiler, n, l, rv.isa)
		}
		return feature{level: l}, nil
	}
	if exts, ok := cn.Features[n]; ok {
		for _, x := range exts {
			if e, ok := rv.m.Extensions[x]; !ok || e.ISA != rv.isa {
				return feature{}, fmt.Errorf("%s maps %s's %q to the extension %q, which matrix.yaml does not define for %s", featuresFile, compiler, n, x, rv.isa)
			}
		}
		return feature{exts: exts}, nil
	}
	if compiler == "gcc" {
		// GCC's tokens are matrix.yaml's march spellings.
		for name, e := range rv.m.Extensions {
			if e.March == n && e.ISA == rv.isa {
				return feature{exts: []string{name}}, nil
			}
		}
	} else if e, ok := rv.m.Extensions[n]; ok && e.ISA == rv.isa {
		return feature{exts: []string{n}}, nil
	}
	return feature{}, fmt.Errorf("%s does not say what %s's feature name %q enables, so it is not guessed at (add it under %s.levels or %s.features, or the level or extension to matrix.yaml)", featuresFile, compiler, n, compiler, compiler)
}

// addFeature adds what a feature name enables to exts, raising level to
// the feature's when it is one above it.
func (rv *Resolver) addFeature(exts matrix.Set, level string, f feature) (string, error) {
	if f.level != "" {
		le, err := rv.m.LevelExtensions(f.level)
		if err != nil {
			return "", err
		}
		for k := range le {
			exts[k] = true
		}
		if level == "" || rv.m.LevelWithin(level, f.level) {
			level = f.level
		}
		return level, nil
	}
	for k := range rv.m.Closure(f.exts) {
		exts[k] = true
	}
	return level, nil
}

// removeFeature removes the extension a feature name is from exts, and
// every extension that implies it, as LLVM does for -NAME. A name of
// several extensions is a bundle (LLVM's crypto: aes and sha2), and LLVM
// taking the bundle away leaves its parts; a level is not taken away.
func (rv *Resolver) removeFeature(exts matrix.Set, f feature) {
	if len(f.exts) != 1 {
		return
	}
	x := f.exts[0]
	for name := range exts {
		if rv.m.Closure([]string{name})[x] {
			delete(exts, name)
		}
	}
}
