// SPDX-License-Identifier: MIT

// Package xtimebench compares the Go binding with golang.org/x/time/rate.
// It is a module of its own so that the binding's module needs nothing
// outside the standard library: only this comparison requires x/time
// (Debian's golang-golang-x-time-dev offline; bindings/go/run-tests.sh).
package xtimebench
