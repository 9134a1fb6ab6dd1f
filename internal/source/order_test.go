package source

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestBuildOrderFromScript(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "build-thirdparty.sh")
	os.WriteFile(script, []byte(`#!/bin/bash
packages=()
while [[ $# -gt 0 ]]; do packages+=("$1"); shift; done
if [[ "${#packages[@]}" -eq 0 ]]; then
    packages=(
        openssl
        zlib # a comment (with parentheses)
        boost # must before thrift
        protobuf
    )
    read -r -a packages <<<"${packages[*]} hadoop_libs"
fi
`), 0o644)
	got, err := BuildOrder(script)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"openssl", "zlib", "boost", "protobuf"}; !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// The real 2.1.7 script: zlib is built before protobuf, protobuf before
// brpc, and 63 packages in all.
func TestBuildOrderDoris217(t *testing.T) {
	script := filepath.Join("..", "..", "..", "shared", "corpus", "doris-2.1.7", "thirdparty", "build-thirdparty.sh")
	if _, err := os.Stat(script); err != nil {
		t.Skipf("no corpus (%v): ../shared/corpus is not here", err)
	}
	got, err := BuildOrder(script)
	if err != nil {
		t.Fatal(err)
	}
	at := func(n string) int {
		i := slices.Index(got, n)
		if i < 0 {
			t.Fatalf("%s not in the order %q", n, got)
		}
		return i
	}
	if !(at("openssl") == 1 && at("zlib") < at("protobuf") && at("protobuf") < at("brpc") && at("gflags") < at("glog") && got[len(got)-1] == "base64") {
		t.Errorf("order %q", got)
	}
}
