// Package deploy holds what an operator installs: the systemd units of both
// daemons (systemd/) and example configs. Its tests verify the units with
// systemd-analyze, load the configs, and run the coordinator binary on one.
package deploy
