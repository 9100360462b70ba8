// SPDX-License-Identifier: MIT

package ratelimit

import (
	"os"
	"path/filepath"
	"testing"
)

// ReadKeySecret follows the one rule for a secret file (docs/fleet.md, "The
// secret file"): one final "\n" or "\r\n" is not the secret's.
func TestReadKeySecretDropsOneFinalLineEnding(t *testing.T) {
	s := "go-secret-0123456789"
	cases := []struct{ file, want string }{
		{s, s},
		{s + "\n", s},
		{s + "\r\n", s},
		{s + "\n\n", s + "\n"},
		{s + "\r", s + "\r"},
		{"\n" + s, "\n" + s},
	}
	dir := t.TempDir()
	for i, c := range cases {
		path := filepath.Join(dir, "secret")
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadKeySecret(path)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if string(got) != c.want {
			t.Errorf("case %d: %q, want %q", i, got, c.want)
		}
	}
	if _, err := ReadKeySecret(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file read without an error")
	}
}
