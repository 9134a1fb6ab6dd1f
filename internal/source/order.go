package source

import (
	"bytes"
	"regexp"
	"slices"
	"sync"

	"github.com/dorisarm/dorisarm/internal/fsutil"
)

var (
	packagesArrayRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^[ \t]*packages=\(`) })
	buildWordRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_]+$`) })
)

// BuildOrder returns the order build-thirdparty.sh builds its packages in
// when it is given none: the build-function names of its longest literal
// `packages=( ... )` array (comments dropped), as the script's last loop
// runs them. Packages the script adds otherwise (hadoop_libs on Linux)
// are not in it. nil when the script has no such array.
func BuildOrder(script string) ([]string, error) {
	data, err := fsutil.ReadFile(script, maxScript)
	if err != nil {
		return nil, err
	}
	var best []string
	for _, loc := range packagesArrayRE().FindAllIndex(data, -1) {
		rest := data[loc[1]:]
		end := bytes.IndexByte(stripComments(rest), ')')
		if end < 0 {
			continue
		}
		var words []string
		for _, w := range bytes.Fields(stripComments(rest)[:end]) {
			if !buildWordRE().Match(w) {
				words = nil // not a literal list (an expansion): not the order
				break
			}
			words = append(words, string(w))
		}
		if len(words) > len(best) {
			best = words
		}
	}
	return slices.Clip(best), nil
}

// stripComments blanks shell comments (a # at a word's start to the end of
// its line), keeping offsets.
func stripComments(b []byte) []byte {
	out := bytes.Clone(b)
	in := false
	for i, c := range out {
		switch {
		case c == '\n':
			in = false
		case in:
			out[i] = ' '
		case c == '#' && (i == 0 || out[i-1] == ' ' || out[i-1] == '\t' || out[i-1] == '\n' || out[i-1] == '('):
			in = true
			out[i] = ' '
		}
	}
	return out
}
