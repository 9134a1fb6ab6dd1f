// Command gensnap rewrites internal/datafile/snapshots.bin from the files
// snapshots.list names. Run it with `go generate ./internal/datafile`.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

func main() {
	// go generate runs in the package directory, internal/datafile.
	root := filepath.Join("..", "..")
	files, err := datafile.ListSources(root, "snapshots.list")
	if err == nil {
		var blob []byte
		if blob, err = datafile.EncodeSnapshots(files); err == nil {
			err = os.WriteFile("snapshots.bin", blob, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gensnap:", err)
		os.Exit(1)
	}
	fmt.Printf("snapshots.bin: %d files\n", len(files))
}
