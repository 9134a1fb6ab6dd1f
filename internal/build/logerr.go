package build

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/dorisarm/dorisarm/internal/plan"
)

// errorLine matches the lines of a build log that say what went wrong:
// compiler and linker diagnostics, CMake and autoconf errors, make's and
// ninja's failure lines, a missing file or program, a file tool (cp,
// install, mkdir) refused.
var errorLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^|[\s:])(fatal )?error[:!]|CMake Error|configure: error|undefined reference to|cannot find -l|No such file or directory|: Not a directory|cannot create (regular file|directory|symbolic link)|Permission denied|No space left on device|command not found|^FAILED: |\*\*\* .*Error [0-9]+|Segmentation fault`)
})

// maxLogLine bounds one quoted log line.
const maxLogLine = 400

// firstErrors are the first n lines of a log that say what went wrong,
// with their line numbers: the cause is usually there, while the last lines
// only say that make gave up. The log is streamed, never held whole.
func firstErrors(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	br := bufio.NewReaderSize(f, 64<<10)
	for no := 1; len(out) < n; no++ {
		line, err := readLine(br)
		if err != nil && line == "" {
			break
		}
		if errorLine().MatchString(line) {
			if len(line) > maxLogLine {
				line = line[:maxLogLine] + " …"
			}
			out = append(out, fmt.Sprintf("line %d: %s", no, strings.TrimSpace(line)))
		}
		if err != nil {
			break
		}
	}
	return out
}

// readLine reads one line of any length, keeping at most maxLogLine+1
// bytes of it.
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		frag, isPrefix, err := br.ReadLine()
		if len(b) <= maxLogLine {
			b = append(b, frag...)
		}
		if err != nil {
			return string(b), err
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}

// tailBytes bounds what is read of a log for its last lines.
const tailBytes = 256 << 10

// tail is the last n lines of a log, read from its last tailBytes.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > tailBytes {
		f.Seek(st.Size()-tailBytes, io.SeekStart)
	}
	data, err := io.ReadAll(io.LimitReader(f, tailBytes))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// hostLeaks are the lines of a step's log in which the generated CMake
// toolchain file named a header or library path past the sysroot and
// installed/ (the build machine's), or a sysroot library installed/ also
// has: what the step built may have the build machine's copy in it.
func hostLeaks(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := readLine(br)
		if i := strings.Index(line, "dorisarm: "); i >= 0 && (strings.Contains(line, " is on the build machine") || strings.Contains(line, " is the sysroot's, but installed/ has ")) {
			l := strings.TrimSpace(line[i+len("dorisarm: "):])
			if !seen[l] && len(out) < 20 {
				seen[l] = true
				out = append(out, l)
			}
		}
		if err != nil {
			return out
		}
	}
}

// leakError fails a step whose CMake configure found headers or libraries
// on the build machine (hostLeaks), naming the package and the paths.
func leakError(s plan.Step, logPath string) error {
	leaks := hostLeaks(logPath)
	if len(leaks) == 0 {
		return nil
	}
	who := "step " + s.ID
	if pkg, ok := strings.CutPrefix(s.ID, "thirdparty:"); ok {
		who = "package " + pkg
	}
	return fmt.Errorf("%s found headers or libraries outside the sysroot and installed/ at configure (the build machine's would be built in); give it installed/'s (a recipe dep, a cmake_cache pin) or drop the explicit host path:\n  %s",
		who, strings.Join(leaks, "\n  "))
}
