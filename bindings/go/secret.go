// SPDX-License-Identifier: MIT

package ratelimit

import (
	"bytes"
	"io"
	"os"
)

// ReadKeySecret reads a fleet's key secret from a file by the rule of every
// component that reads one (docs/fleet.md, "The secret file"): the file's
// bytes less one final "\n" or "\r\n", so a file written with echo holds
// the secret the CLI, the gateway and the nginx module read from it. Give
// the result as Config.KeySecret; New checks its length (16..4096 bytes).
func ReadKeySecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The longest secret, its line ending, and one byte more for New to refuse.
	b, err := io.ReadAll(io.LimitReader(f, 4099))
	if err != nil {
		return nil, err
	}
	if bytes.HasSuffix(b, []byte("\r\n")) {
		return b[:len(b)-2], nil
	}
	return bytes.TrimSuffix(b, []byte("\n")), nil
}
