package ledger

import (
	"errors"
	"strings"
	"testing"
)

// Issue 30: when every bookie is read-only (full disks), the placement
// error says so, naming them; the broker passes it on to producers.
func TestPlacementErrorNamesReadOnlyBookies(t *testing.T) {
	bookies := []BookieInfo{{ID: "a", ReadOnly: true}, {ID: "b", ReadOnly: true}}
	policies := map[string]PlacementPolicy{"random": NewRandomPlacement(1), "rack": NewRackAwarePlacement(1)}
	for name, p := range policies {
		_, err := p.NewEnsemble(bookies, 1, 1, 1, nil)
		if !errors.Is(err, ErrNotEnoughBookies) || !strings.Contains(err.Error(), "read-only") ||
			!strings.Contains(err.Error(), "a, b") {
			t.Errorf("%s: NewEnsemble: %v, want ErrNotEnoughBookies naming the read-only bookies a, b", name, err)
		}
		full := []BookieInfo{{ID: "a", ReadOnly: true, OutOfSpace: true}, {ID: "b", ReadOnly: true, OutOfSpace: true}}
		_, err = p.Replace(full, []string{"a"}, 0, 1, []string{"a"})
		if !errors.Is(err, ErrNotEnoughBookies) || !strings.Contains(err.Error(), "read-only: a, b: out of disk space") {
			t.Errorf("%s: Replace: %v, want ErrNotEnoughBookies naming the full bookies a, b", name, err)
		}
	}
}
