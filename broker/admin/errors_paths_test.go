package admin

import "testing"

// Error bodies never show the metadata store's layout; topic names and
// URLs (whose '/' follows ':') stay readable.
func TestWithoutPaths(t *testing.T) {
	for in, want := range map[string]string{
		`metadata children /managed-ledgers/a b/x: invalid path "/managed-ledgers/a"`: `metadata children <path> b/x: invalid path "<path>"`,
		"topic persistent://public/default/x not found":                               "topic persistent://public/default/x not found",
		"open /var/lib/magnetar/ledgers/x: no space":                                  "open <path> no space",
		"service http://host:8080/admin/v2 unreachable":                               "service http://host:8080/admin/v2 unreachable",
		"must be >= 0 (got 1/2)":                                                      "must be >= 0 (got 1/2)",
	} {
		if got := withoutPaths(in); got != want {
			t.Errorf("withoutPaths(%q) = %q, want %q", in, got, want)
		}
	}
}
