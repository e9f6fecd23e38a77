package metadata

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EscapeSegment makes a name (a topic's local name, a subscription) one
// path segment that every backend accepts: '%', '/', control characters,
// invalid UTF-8 and the code points ZooKeeper refuses in paths
// (U+D800-U+F8FF, U+FFF0-U+FFFF) become %XX per byte, and a name of only
// dots is escaped whole ("." and ".." are not segments). Everything else
// stays as it is, so names that never needed escaping keep the node they
// always had. Without it a '/' in a topic name nested one topic's
// metadata inside another's.
func EscapeSegment(name string) string {
	if name == "" || strings.Trim(name, ".") == "" {
		return percentEncode(name)
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if needsEscape(r, size) {
			b.WriteString(percentEncode(name[i : i+size]))
		} else {
			b.WriteString(name[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(r rune, size int) bool {
	return r == '%' || r == '/' || (r == utf8.RuneError && size == 1) || unicode.IsControl(r) ||
		(r >= 0xD800 && r <= 0xF8FF) || (r >= 0xFFF0 && r <= 0xFFFF)
}

func percentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	out := make([]byte, 0, 3*len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, '%', hex[s[i]>>4], hex[s[i]&15])
	}
	return string(out)
}

// UnescapeSegment is the inverse of EscapeSegment.
func UnescapeSegment(segment string) (string, error) {
	name, err := url.PathUnescape(segment)
	if err != nil {
		return "", fmt.Errorf("%w: segment %q is not escaped as EscapeSegment does: %v", ErrInvalidPath, segment, err)
	}
	return name, nil
}
