package sign

import (
	"fmt"
	"io"

	"github.com/dorisarm/dorisarm/internal/fault"
)

// EnvPassword is a key's password from COSIGN_PASSWORD (looked up with
// lookup, e.g. os.LookupEnv), as cosign reads it: it must be set, and may be
// empty.
func EnvPassword(lookup func(string) (string, bool)) ([]byte, error) {
	pw, ok := lookup("COSIGN_PASSWORD")
	if !ok {
		return nil, fault.Inputf("set COSIGN_PASSWORD (it may be empty) to the key's password")
	}
	return []byte(pw), nil
}

// NewKeyPair writes a key pair into dir (Keygen), encrypted with the
// password password gives; a key pair there already, or a directory that
// cannot be written, is bad input.
func NewKeyPair(dir string, password func() ([]byte, error)) (KeyPair, error) {
	pw, err := password()
	if err != nil {
		return KeyPair{}, err
	}
	priv, pub, err := Keygen(dir, pw)
	if err != nil {
		return KeyPair{}, fault.Input(err)
	}
	return KeyPair{Private: priv, Public: pub}, nil
}

// KeyPair names the files Keygen wrote.
type KeyPair struct {
	Private string `json:"private_key"`
	Public  string `json:"public_key"`
}

// WriteText says which files were written.
func (k KeyPair) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "wrote %s and %s\n", k.Private, k.Public)
	return err
}
