//go:build race

package registry

// raceDetector: the race detector slows every byte a handler reads or
// hashes several times over, so tests that time a server skip under it.
const raceDetector = true
