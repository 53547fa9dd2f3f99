//go:build race

package integration

// raceBuild: this test binary was built with -race, so the daemons it runs
// are too (Binaries).
const raceBuild = true
