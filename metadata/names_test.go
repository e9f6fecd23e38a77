package metadata

import (
	"testing"

	"pgregory.net/rapid"
)

func TestEscapeSegment(t *testing.T) {
	for in, want := range map[string]string{
		"my-topic": "my-topic", "a:b=c": "a:b=c", "日本": "日本", "a b+c": "a b+c", "a/b": "a%2Fb", "50%": "50%25",
		".": "%2E", "..": "%2E%2E", "": "", "a\x01": "a%01", "\xff": "%FF", "\uFFFD": "%EF%BF%BD", "a.b": "a.b",
	} {
		if got := EscapeSegment(in); got != want {
			t.Errorf("EscapeSegment(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every name escapes to one valid path segment and comes back unchanged.
func TestEscapeSegmentRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.OneOf(rapid.String(), rapid.StringMatching(`[./%a-z\x00-\x1f]{1,8}`)).Draw(t, "name")
		if name == "" {
			return
		}
		seg := EscapeSegment(name)
		if err := ValidatePath("/x/" + seg); err != nil {
			t.Fatalf("EscapeSegment(%q) = %q: %v", name, seg, err)
		}
		back, err := UnescapeSegment(seg)
		if err != nil || back != name {
			t.Fatalf("UnescapeSegment(%q) = %q, %v; want %q", seg, back, err, name)
		}
	})
}
