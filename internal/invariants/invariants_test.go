package invariants

import "testing"

func TestCheck(t *testing.T) {
	Check(true, "never")
	defer func() {
		r := recover()
		if Enabled != (r != nil) {
			t.Fatalf("Enabled=%v, Check(false) recovered %v", Enabled, r)
		}
	}()
	Check(false, "broken %d", 1)
}
