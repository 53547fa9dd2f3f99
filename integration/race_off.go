//go:build !race

package integration

// raceBuild: this test binary was built without -race.
const raceBuild = false
