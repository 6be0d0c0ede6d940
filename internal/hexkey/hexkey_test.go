package hexkey

import (
	"bytes"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	if got := Upper([]byte{0xab, 0x01}); got != "AB01" {
		t.Errorf("Upper = %q", got)
	}
	if got := Lower([]byte{0xab, 0x01}); got != "ab01" {
		t.Errorf("Lower = %q", got)
	}
	if got := Lower(nil); got != "" {
		t.Errorf("Lower(nil) = %q", got)
	}
	exact := bytes.Repeat([]byte{0x11}, Max)
	if got := Lower(exact); got != strings.Repeat("11", Max) {
		t.Errorf("a key of Max bytes is cut: %q", got)
	}
	long := bytes.Repeat([]byte{0xcd}, 70000)
	want := strings.Repeat("CD", Max) + "...(70000 bytes)"
	if got := Upper(long); got != want {
		t.Errorf("Upper(70000 bytes) = %q", got)
	}
	if got := Lower(long); got != strings.Repeat("cd", Max)+"...(70000 bytes)" {
		t.Errorf("Lower(70000 bytes) = %q", got)
	}
}
