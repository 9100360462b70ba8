// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <ratelimit.h>
*/
import "C"

import "fmt"

// Code is one of the library's negative RL_E* error codes, never
// renumbered. Compare with errors.Is(err, ratelimit.ErrKeyLen).
type Code int

// The codes of include/ratelimit.h (RL_ERRNO_MAP). The names and messages
// come from the library itself (rl_err_name, rl_strerror), read once.
const (
	ErrInvalid      Code = C.RL_EINVAL
	ErrNoMemory     Code = C.RL_ENOMEM
	ErrNotFound     Code = C.RL_ENOTFOUND
	ErrRange        Code = C.RL_ERANGE
	ErrSize         Code = C.RL_ESIZE
	ErrKeyLen       Code = C.RL_EKEYLEN
	ErrSpec         Code = C.RL_ESPEC
	ErrExist        Code = C.RL_EEXIST
	ErrLimits       Code = C.RL_ELIMITS
	ErrCost         Code = C.RL_ECOST
	ErrForked       Code = C.RL_EFORKED
	ErrNotSupported Code = C.RL_ENOTSUP
	ErrName         Code = C.RL_ENAME
	ErrMode         Code = C.RL_EMODE
	ErrAuth         Code = C.RL_EAUTH
	ErrFull         Code = C.RL_EFULL
	ErrExpired      Code = C.RL_EEXPIRED
	ErrUnavailable  Code = C.RL_EUNAVAIL
)

type codeText struct{ name, message string }

// Read once, so an error costs no cgo call; a code this table misses (a
// newer library) is read when it occurs.
var codeTexts = func() map[Code]codeText {
	m := make(map[Code]codeText)
	for c := Code(-1); c >= -64; c-- {
		m[c] = codeText{C.GoString(C.rl_err_name(C.int(c))), C.GoString(C.rl_strerror(C.int(c)))}
	}
	return m
}()

func (c Code) text() codeText {
	if t, ok := codeTexts[c]; ok {
		return t
	}
	return codeText{C.GoString(C.rl_err_name(C.int(c))), C.GoString(C.rl_strerror(C.int(c)))}
}

// Name is the code's name, e.g. "RL_EKEYLEN" (rl_err_name).
func (c Code) Name() string { return c.text().name }

// Error is the code's message (rl_strerror).
func (c Code) Error() string { return c.text().message }

// Error is a failed call: which library function, the code, and detail
// when there is some (rl_limit_parse's message naming the bad word).
type Error struct {
	Code   Code
	Op     string
	Detail string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("ratelimit: %s: %s: %s", e.Op, e.Code.Name(), e.Code.Error())
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap makes errors.Is(err, ErrSpec) and errors.As(err, &code) work.
func (e *Error) Unwrap() error { return e.Code }
