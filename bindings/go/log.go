// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// Log levels of Config.Log (RL_LOG_*).
const (
	LogError = 0
	LogWarn  = 1
	LogInfo  = 2
	LogDebug = 3
)

// rlgoLog is rl_config_t.log: ud is the cgo.Handle of the Limiter's
// Config.Log. It runs on the library's threads (sync, exact, quota), never
// while the library holds a lock a call could need.
//
//export rlgoLog
func rlgoLog(ud unsafe.Pointer, level C.int32_t, msg *C.char) {
	fn := cgo.Handle(uintptr(ud)).Value().(func(int, string))
	defer func() { _ = recover() }() // a panic must not unwind into C
	fn(int(level), C.GoString(msg))
}
