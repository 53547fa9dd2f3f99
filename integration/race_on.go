//go:build race

package integration

// raceBuild: this test binary was built with -race, so the daemons it runs
// are too by default (RaceDaemons).
const raceBuild = true
