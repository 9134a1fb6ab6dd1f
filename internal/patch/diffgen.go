package patch

import (
	"fmt"
	"strings"
)

// edit is one line of an edit script: op ' ', '-' or '+'; ai/bi index the
// line in a or b.
type edit struct {
	op     byte
	ai, bi int
}

// myers computes a shortest edit script from a to b (Myers 1986).
func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	max := n + m
	if max == 0 {
		return nil
	}
	off := max
	v := make([]int, 2*max+2)
	var trace [][]int
	for d := 0; d <= max; d++ {
		snap := make([]int, len(v))
		copy(snap, v)
		trace = append(trace, snap)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, a, b, d, off)
			}
		}
	}
	return nil
}

func backtrack(trace [][]int, a, b []string, d, off int) []edit {
	x, y := len(a), len(b)
	var rev []edit
	for ; d > 0; d-- {
		v := trace[d]
		k := x - y
		var prevK int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := v[off+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			rev = append(rev, edit{' ', x, y})
		}
		if x == prevX {
			y--
			rev = append(rev, edit{'+', x, y})
		} else {
			x--
			rev = append(rev, edit{'-', x, y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, edit{' ', x, y})
	}
	out := make([]edit, len(rev))
	for i := range rev {
		out[i] = rev[len(rev)-1-i]
	}
	return out
}

// Unified returns a unified diff of one file, from content a to content b
// (nil a: the file is created; nil b: it is deleted), with n lines of context.
// It returns "" when the contents are equal.
func Unified(oldName, newName string, a, b []byte, n int) string {
	al, aeol := toLines(a)
	bl, beol := toLines(b)
	if a != nil && b != nil && aeol == beol && sameExact(al, bl) {
		return ""
	}
	// Compare lines including their end-of-file state so a change of the final
	// newline shows up as a change of the last line.
	ak, bk := keyed(al, aeol), keyed(bl, beol)
	script := myers(ak, bk)
	var out strings.Builder
	from, to := "a/"+oldName, "b/"+newName
	if a == nil {
		from = "/dev/null"
	}
	if b == nil {
		to = "/dev/null"
	}
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", from, to)
	// Group edits into hunks with n lines of context.
	i := 0
	for i < len(script) {
		for i < len(script) && script[i].op == ' ' {
			i++
		}
		if i >= len(script) {
			break
		}
		start := i - n
		if start < 0 {
			start = 0
		}
		end := i
		for end < len(script) {
			if script[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(script) && script[run].op == ' ' {
				run++
			}
			if run == len(script) || run-end > 2*n {
				end += min(n, run-end)
				break
			}
			end = run
		}
		writeHunk(&out, script[start:end], al, bl, aeol, beol)
		i = end
	}
	return out.String()
}

func keyed(lines []string, eol bool) []string {
	out := make([]string, len(lines))
	copy(out, lines)
	if len(out) > 0 && !eol {
		out[len(out)-1] += "\x00noeol"
	}
	return out
}

func sameExact(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func writeHunk(out *strings.Builder, es []edit, a, b []string, aeol, beol bool) {
	oldStart, newStart, oldN, newN := -1, -1, 0, 0
	for _, e := range es {
		if e.op != '+' {
			if oldStart < 0 {
				oldStart = e.ai
			}
			oldN++
		}
		if e.op != '-' {
			if newStart < 0 {
				newStart = e.bi
			}
			newN++
		}
	}
	// Empty sides start at the line before the hunk (0 for an empty file).
	if oldStart < 0 {
		oldStart = es[0].ai - 1
	}
	if newStart < 0 {
		newStart = es[0].bi - 1
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", rangeStr(oldStart, oldN), rangeStr(newStart, newN))
	for _, e := range es {
		var text string
		noEOL := false
		switch e.op {
		case ' ', '-':
			text = a[e.ai]
			noEOL = !aeol && e.ai == len(a)-1
		case '+':
			text = b[e.bi]
			noEOL = !beol && e.bi == len(b)-1
		}
		if e.op == ' ' && !noEOL && !beol && e.bi == len(b)-1 {
			noEOL = true
		}
		out.WriteByte(e.op)
		out.WriteString(text)
		out.WriteByte('\n')
		if noEOL {
			out.WriteString("\\ No newline at end of file\n")
		}
	}
}

func rangeStr(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start+1)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
