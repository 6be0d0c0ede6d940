// Package hexkey formats keys for error messages: in hex, and cut short
// when long, so that an error about a key of megabytes stays readable.
package hexkey

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Max is how many bytes of a key a message shows; a longer key shows its
// first Max bytes and its length.
const Max = 64

// Upper formats b in upper-case hex, like %X, cut after Max bytes.
func Upper(b []byte) string { return format(b, true) }

// Lower formats b in lower-case hex, like %x, cut after Max bytes.
func Lower(b []byte) string { return format(b, false) }

func format(b []byte, upper bool) string {
	shown := b[:min(len(b), Max)]
	s := hex.EncodeToString(shown)
	if upper {
		s = strings.ToUpper(s)
	}
	if len(shown) == len(b) {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s, len(b))
}
