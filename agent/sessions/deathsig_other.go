//go:build !linux

package sessions

import "syscall"

func dieWithAgent(*syscall.SysProcAttr) {}

func lockForkThread() func() { return func() {} }
