package build

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// What a failed download looks like in a step's log. Tools that print the
// URL (wget, git, CMake's ExternalProject, pip, Maven) are read directly;
// curl names the host, which is matched with a URL seen earlier in the log
// (make and set -x echo the command); CMake's file(DOWNLOAD) names only its
// call site ("CMake Error at cmake/CPM.cmake:19 (file):" then "file
// DOWNLOAD …"), so the URL is read from that line of the CMake file.
var downloadRE = sync.OnceValue(func() *downloadPatterns {
	return &downloadPatterns{
		url:       regexp.MustCompile("(?:https?|ftp|git|ssh)://[^\\s'\"<>`)\\]]+"),
		wget:      regexp.MustCompile(`^--\d{4}-\d\d-\d\d \d\d:\d\d:\d\d--\s+(\S+)`),
		hostFail:  regexp.MustCompile(`(?i)(?:could not resolve host|unable to resolve host address|failed to connect to|could not connect to)[: ]+[‘'"]?([A-Za-z0-9.-]+\.[A-Za-z]{2,})`),
		failWords: regexp.MustCompile(`(?i)download|fetch|clon|transfer|unable to access|could not resolve|unreachable|failed to connect|connection refused|name or service not known|temporary failure in name resolution`),
		cmakeAt:   regexp.MustCompile(`^CMake Error at (.+):(\d+) \(file\):`),
		cmakeLog:  regexp.MustCompile(`See also "(.+)/CMakeFiles/CMake(?:Output|Error|ConfigureLog)\.log"`),
	}
})

type downloadPatterns struct {
	url, wget, hostFail, failWords, cmakeAt, cmakeLog *regexp.Regexp
}

// downloadWatch reads a step's output line by line for signs of a download.
type downloadWatch struct {
	mu       sync.Mutex
	partial  []byte
	seen     []string // URLs seen anywhere, newest last (bounded)
	tried    []string // URLs a failed download named
	cmakeAt  *cmakeSite
	sites    []cmakeSite // file(DOWNLOAD) call sites
	buildDir []string    // CMake build directories the log names
}

type cmakeSite struct {
	file  string
	line  int
	after int // lines read since the "CMake Error at" line
}

func (w *downloadWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data := append(w.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		w.line(string(data[:i]))
		data = data[i+1:]
	}
	if len(data) > 4096 {
		data = data[len(data)-4096:]
	}
	w.partial = append([]byte(nil), data...)
	return len(p), nil
}

func (w *downloadWatch) line(l string) {
	re := downloadRE()
	urls := re.url.FindAllString(l, -1)
	for _, u := range urls {
		w.seen = append(w.seen, strings.TrimRight(u, ".,;:"))
	}
	if len(w.seen) > 256 {
		w.seen = w.seen[len(w.seen)-256:]
	}
	if m := re.wget.FindStringSubmatch(l); m != nil {
		w.add(m[1])
	}
	if m := re.hostFail.FindStringSubmatch(l); m != nil {
		w.add(w.urlForHost(m[1]))
	}
	if len(urls) > 0 && re.failWords.MatchString(l) {
		for _, u := range urls {
			w.add(strings.TrimRight(u, ".,;:"))
		}
	}
	if m := re.cmakeAt.FindStringSubmatch(l); m != nil {
		n, _ := strconv.Atoi(m[2])
		w.cmakeAt = &cmakeSite{file: m[1], line: n}
	} else if w.cmakeAt != nil {
		if strings.Contains(l, "file DOWNLOAD") {
			w.sites = append(w.sites, *w.cmakeAt)
			w.cmakeAt = nil
		} else if w.cmakeAt.after++; w.cmakeAt.after > 3 {
			w.cmakeAt = nil
		}
	}
	if m := re.cmakeLog.FindStringSubmatch(l); m != nil {
		w.buildDir = append(w.buildDir, m[1])
	}
}

// urlForHost is the newest URL seen for host, or the host itself.
func (w *downloadWatch) urlForHost(host string) string {
	for i := len(w.seen) - 1; i >= 0; i-- {
		if rest, ok := strings.CutPrefix(w.seen[i][strings.Index(w.seen[i], "://")+3:], host); ok && (rest == "" || rest[0] == '/' || rest[0] == ':') {
			return w.seen[i]
		}
	}
	return "https://" + host + "/ (host; the URL is not in the log)"
}

func (w *downloadWatch) add(u string) {
	for _, t := range w.tried {
		if t == u {
			return
		}
	}
	w.tried = append(w.tried, u)
}

// urls are the URLs the step tried to download; dir is where it ran (for
// CMake file(DOWNLOAD) sites named relative to a source directory).
func (w *downloadWatch) urls(dir string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.line(string(w.partial))
		w.partial = nil
	}
	for _, s := range w.sites {
		for _, u := range w.cmakeURLs(s, dir) {
			w.add(u)
		}
	}
	return append([]string(nil), w.tried...)
}

// cmakeURLs reads the file(DOWNLOAD) call at a site and returns its URLs
// as written (variables unexpanded).
func (w *downloadWatch) cmakeURLs(s cmakeSite, dir string) []string {
	var bases []string
	if filepath.IsAbs(s.file) {
		bases = []string{""}
	} else {
		for _, b := range w.buildDir {
			if src := cmakeHome(b); src != "" {
				bases = append(bases, src)
			}
			bases = append(bases, b)
		}
		bases = append(bases, dir)
	}
	for _, b := range bases {
		f, err := os.Open(filepath.Join(b, s.file))
		if err != nil {
			continue
		}
		var call strings.Builder
		sc := bufio.NewScanner(io.LimitReader(f, 4<<20))
		depth, n := 0, 0
		for sc.Scan() {
			n++
			if n < s.line {
				continue
			}
			l := sc.Text()
			call.WriteString(l + "\n")
			depth += strings.Count(l, "(") - strings.Count(l, ")")
			if depth <= 0 || n > s.line+20 {
				break
			}
		}
		f.Close()
		if us := downloadRE().url.FindAllString(call.String(), -1); len(us) > 0 {
			return us
		}
	}
	return []string{"(the URL of the file(DOWNLOAD) at " + s.file + ":" + strconv.Itoa(s.line) + ")"}
}

// cmakeHome is the source directory of a CMake build directory.
func cmakeHome(build string) string {
	data, err := os.ReadFile(filepath.Join(build, "CMakeCache.txt"))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "CMAKE_HOME_DIRECTORY:INTERNAL="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// teeWatch sends what a command writes to w (when set) and to the watch.
func teeWatch(w io.Writer, watch *downloadWatch) io.Writer {
	if w == nil {
		return watch
	}
	return io.MultiWriter(w, watch)
}
