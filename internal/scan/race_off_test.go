//go:build !race

package scan

const raceDetector = false
