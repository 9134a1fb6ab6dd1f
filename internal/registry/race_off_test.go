//go:build !race

package registry

const raceDetector = false
