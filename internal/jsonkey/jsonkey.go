// Package jsonkey says which JSON object keys encoding/json reads into the
// same struct field, so that readers of signed or trusted JSON can refuse
// an object that names one field twice (which copy wins would otherwise
// decide what is trusted).
package jsonkey

import (
	"strings"
	"unicode"
)

// Fold maps keys that encoding/json matches to one struct field
// (bytes.EqualFold: Unicode simple case folding, so "ſ" is "s" and the
// Kelvin sign is "k") to one string: each rune becomes the smallest of its
// folding orbit.
func Fold(k string) string {
	return strings.Map(func(r rune) rune {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		return m
	}, k)
}
