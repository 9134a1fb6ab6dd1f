//go:build race

package scan

// raceDetector: the race detector keeps shadow memory for every byte the
// program touches, so memory bounds measured under it say nothing.
const raceDetector = true
