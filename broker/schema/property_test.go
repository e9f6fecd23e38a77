package schema

import (
	"context"
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/magnetar-io/magnetar/metadata"
)

// pool is the schemas the property tests draw from: compatible and
// incompatible with each other in every direction.
var pool = []Info{
	avroInfo(userV1), avroInfo(userAgeDefault), avroInfo(userAgeNoDef), avroInfo(userAgeLong),
	avroInfo(userNameInt), avroInfo(personV1), {Type: String}, {Type: Int32},
}

// TestPropertyHistoryModel runs random puts and deletes against a model
// of the history (ALWAYS_COMPATIBLE, so that every put is accepted):
// identical schemas since the last deletion return their version, others
// take the next number, deletions hide what came before.
func TestPropertyHistoryModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		st := metadata.NewMemoryServer().NewSession()
		defer st.Close()
		r, _ := New(Config{Store: st, DefaultStrategy: AlwaysCompatible})
		var model []Version // the full history
		for range rapid.IntRange(1, 25).Draw(rt, "ops") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0:
				model = modelDelete(rt, r, model)
			case 1:
				if _, err := r.HardDelete(ctx, topic); err != nil {
					rt.Fatal(err)
				}
				model = nil
			default:
				model = modelPut(rt, r, model, pool[rapid.IntRange(0, len(pool)-1).Draw(rt, "schema")])
			}
			checkModel(rt, r, model)
		}
	})
}

func modelPut(rt *rapid.T, r *Registry, model []Version, info Info) []Version {
	got, err := r.PutIfCompatible(context.Background(), topic, info, "")
	if err != nil {
		rt.Fatalf("put %s: %v", info.Data, err)
	}
	want := findIdentical(live(model), info)
	if want < 0 {
		want = nextVersion(model)
		model = append(model, Version{Info: info, Version: want})
	}
	if got != want {
		rt.Fatalf("put returned version %d, model says %d", got, want)
	}
	return model
}

func modelDelete(rt *rapid.T, r *Registry, model []Version) []Version {
	got, err := r.Delete(context.Background(), topic, "")
	if err != nil {
		rt.Fatal(err)
	}
	want := int64(-1)
	if len(model) > 0 && !model[len(model)-1].Deleted {
		want = nextVersion(model)
		model = append(model, Version{Info: Info{Type: None}, Version: want, Deleted: true})
	}
	if got != want {
		rt.Fatalf("delete returned %d, model says %d", got, want)
	}
	return model
}

func checkModel(rt *rapid.T, r *Registry, model []Version) {
	all, err := r.GetAll(context.Background(), topic)
	if err != nil {
		rt.Fatal(err)
	}
	want := live(model)
	if len(all) != len(want) {
		rt.Fatalf("GetAll has %d versions, model %d", len(all), len(want))
	}
	for i := range all {
		if all[i].Version != want[i].Version || !sameSchema(all[i].Info, want[i].Info) {
			rt.Fatalf("version %d differs from the model", all[i].Version)
		}
	}
	_, err = r.GetLatest(context.Background(), topic)
	if (len(want) == 0) != errors.Is(err, ErrNotFound) {
		rt.Fatalf("GetLatest = %v with %d live versions", err, len(want))
	}
}

// TestPropertyStrategyInvariant: whatever is attempted, the live history
// a strategy admits is compatible under it, pairwise as the strategy
// requires (adjacent versions, or every pair for the transitive ones).
func TestPropertyStrategyInvariant(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := rapid.SampledFrom([]Strategy{Backward, Forward, Full, BackwardTransitive, ForwardTransitive, FullTransitive}).Draw(rt, "strategy")
		st := metadata.NewMemoryServer().NewSession()
		defer st.Close()
		r, _ := New(Config{Store: st, DefaultStrategy: s})
		for range rapid.IntRange(1, 12).Draw(rt, "puts") {
			info := pool[rapid.IntRange(0, len(pool)-1).Draw(rt, "schema")]
			if _, err := r.PutIfCompatible(context.Background(), topic, info, ""); err != nil && !errors.Is(err, ErrIncompatible) {
				rt.Fatal(err)
			}
		}
		all, err := r.GetAll(context.Background(), topic)
		if err != nil {
			rt.Fatal(err)
		}
		for j := 1; j < len(all); j++ {
			from := j - 1
			if s.Transitive() {
				from = 0
			}
			for i := from; i < j; i++ {
				if err := checkPair(all[i].Info, all[j].Info, s); err != nil {
					rt.Fatalf("%s admitted version %d after %d: %v", s, all[j].Version, all[i].Version, err)
				}
			}
		}
	})
}
