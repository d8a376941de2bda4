//go:build !race

package cmdtest

// raceEnabled: this test binary runs under -race.
const raceEnabled = false
