package build

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFirstErrors(t *testing.T) {
	log := filepath.Join(t.TempDir(), "step.log")
	lines := []string{
		"-- The C compiler identification is Clang 16.0.6",
		"clang++ -Werror=return-type -Wall -c gzip_stream.cc",            // -Werror is a flag, not an error
		"checking for strerror_r... yes",                                 // not an error
		"/src/gzip_stream.h:50:10: fatal error: 'zlib.h' file not found", // the cause
		"#include <zlib.h>",
		"1 error generated.",
		"make[2]: *** [CMakeFiles/libprotobuf.dir/build.make:76: gzip_stream.cc.o] Error 1", // make giving up
		strings.Repeat("x", 5000) + " error: very long",
	}
	for i := 0; i < 200; i++ {
		lines = append(lines, "noise")
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := firstErrors(log, 5)
	want := []string{
		"line 4: /src/gzip_stream.h:50:10: fatal error: 'zlib.h' file not found",
		"line 7: make[2]: *** [CMakeFiles/libprotobuf.dir/build.make:76: gzip_stream.cc.o] Error 1",
	}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || len(got[2]) > maxLogLine+20 {
		t.Errorf("got %q", got)
	}
	if got := firstErrors(log, 1); len(got) != 1 || got[0] != want[0] {
		t.Errorf("n=1: %q", got)
	}
	if got := firstErrors(filepath.Join(t.TempDir(), "none"), 5); got != nil {
		t.Errorf("no log: %q", got)
	}
	if got := tail(log, 2); got != "noise\nnoise" {
		t.Errorf("tail: %q", got)
	}

	// A --keep-going summary quotes the cause, not make's exit status.
	pe := &PackagesError{Target: "kunpeng920", Failed: []PackageFailure{{Package: "PROTOBUF", Step: "thirdparty:PROTOBUF",
		Err: &StepError{Target: "kunpeng920", Step: "thirdparty:PROTOBUF", Log: log, First: firstErrors(log, 5), Err: errors.New("exit status 2")}}}}
	if msg := pe.Error(); !strings.Contains(msg, "fatal error: 'zlib.h' file not found") {
		t.Errorf("summary: %s", msg)
	}
}
