package jsonkey

import (
	"encoding/json"
	"testing"
)

// TestFold: keys encoding/json puts in one field fold to one string; keys
// it keeps apart do not.
func TestFold(t *testing.T) {
	type doc struct {
		Expires string `json:"expires"`
	}
	for _, k := range []string{"expires", "EXPIRES", "Expires", "expireſ", "\u212axpires"} {
		var d doc
		if err := json.Unmarshal([]byte(`{"`+k+`":"x"}`), &d); err != nil {
			t.Fatal(err)
		}
		same := d.Expires == "x"
		if got := Fold(k) == Fold("expires"); got != same {
			t.Errorf("%q: folds with \"expires\" %v, encoding/json reads it into the field %v", k, got, same)
		}
	}
	if Fold("expires") == Fold("expire") {
		t.Error("different keys fold together")
	}
}
