package recipe

import (
	"crypto/sha256"
	"encoding/hex"
)

func digestBytes(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
