package trustroot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One field given twice, under its protobuf name and its JSON name (or in
// another case, which encoding/json also matches): which one was read
// depended on Go's map order, so one file could trust a log from 2021 on
// one run and from 2099 on the next. It is refused.
func TestFieldTwiceRefused(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "public-good.json"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(data)
	const start = `"validFor": {
          "start": "2021-01-12T11:53:27.000Z"
        }`
	if !strings.Contains(good, start) {
		t.Fatal("the file has changed")
	}
	for what, twice := range map[string]string{
		"validFor and valid_for": start + `, "valid_for": {"start": "2099-01-01T00:00:00Z"}`,
		"validFor and VALIDFOR":  start + `, "VALIDFOR": {"start": "2099-01-01T00:00:00Z"}`,
	} {
		doc := strings.Replace(good, start, twice, 1)
		starts := map[string]bool{}
		var err error
		for range 30 {
			var r *Root
			if r, err = Parse([]byte(doc)); err != nil {
				break
			}
			for _, l := range r.Tlogs {
				starts[l.Start.UTC().String()] = true
			}
		}
		if err == nil {
			t.Errorf("%s: parsed; the log's start read as %v", what, starts)
		} else if !strings.Contains(err.Error(), "twice") {
			t.Errorf("%s: %v", what, err)
		}
	}
}
