package resources

import (
	"errors"
	"regexp"
	"testing"

	"pgregory.net/rapid"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"public", "a-b_c.d", "x=y:z", "0", "US_West-2"} {
		if err := ValidateName("tenant", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "a b", "ä", ".", "..", "a\n", "a*"} {
		err := ValidateName("namespace", bad)
		var fe *FieldError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != "namespace" {
			t.Errorf("%q: got %v, want ErrInvalid on namespace", bad, err)
		}
	}
}

// ValidateName accepts exactly what Pulsar's NamedEntity pattern does
// (made non-empty; "." and ".." refused), on random strings of name bytes,
// other ASCII, non-ASCII and invalid UTF-8.
func TestValidateNameMatchesPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[-=:.\w]+$`)
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringOfN(rapid.OneOf(rapid.RuneFrom([]rune("aZ09_-=:./ *\xe4\u00a0")), rapid.Rune()), 0, 12, -1).Draw(t, "name")
		if rapid.Bool().Draw(t, "invalid utf-8") {
			name += "\xff"
		}
		want := pattern.MatchString(name) && name != "." && name != ".."
		if got := ValidateName("tenant", name) == nil; got != want {
			t.Fatalf("ValidateName(%q) accepted=%v, the pattern says %v", name, got, want)
		}
	})
}

// Encoding matches Java's URLEncoder on the cases that differ from Go's
// url.QueryEscape, and decoding reverses it for every string.
func TestLocalNameEncoding(t *testing.T) {
	cases := map[string]string{
		"my-topic_1.x": "my-topic_1.x",
		"a b":          "a+b",
		"a/b":          "a%2Fb",
		"star*":        "star*",
		"tilde~":       "tilde%7E",
		"ü":            "%C3%BC",
		"100%":         "100%25",
	}
	for in, want := range cases {
		if got := encodeLocalName(in); got != want {
			t.Errorf("encode(%q) = %q, want %q", in, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		got, err := decodeLocalName(encodeLocalName(s))
		if err != nil || got != s {
			t.Fatalf("decode(encode(%q)) = %q, %v", s, got, err)
		}
	})
	if _, err := decodeLocalName("bad%2"); err == nil {
		t.Error("truncated escape decoded")
	}
}
