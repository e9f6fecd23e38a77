package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A Part is one invocation's results, saved after every run
// (-chaos.part), so that a suite longer than one sitting (20 seeds of
// every scenario take close to three hours) can run in parts, by seed
// ranges, and be reported as one (-chaos.merge), and so that an
// invocation cut short still leaves what it measured.
type Part struct {
	Started time.Time
	Took    time.Duration
	Commit  string
	Command string
	Budget  string `json:",omitempty"`
	Runs    []PartRun
	// Slowest is each scenario's slowest run's timeline in this part.
	Slowest map[string]*Slowest `json:",omitempty"`
}

// PartRun is one run of a Part.
type PartRun struct {
	Scenario string
	Seed     int64
	Verdict  Verdict
	Err      string `json:",omitempty"`
	Dir      string
	Took     time.Duration
}

// Part returns the invocation's results so far.
func (rep *Report) Part() Part {
	p := Part{Started: rep.Started, Took: rep.Took, Commit: rep.Commit, Command: rep.Command, Budget: rep.Budget,
		Slowest: rep.Slowest}
	if p.Took == 0 {
		p.Took = time.Since(rep.Started)
	}
	for _, r := range rep.Runs {
		pr := PartRun{Scenario: r.Scenario.Name, Seed: r.Seed, Verdict: r.Verdict, Dir: r.Dir, Took: r.Took}
		if r.Err != nil {
			pr.Err = r.Err.Error()
		}
		p.Runs = append(p.Runs, pr)
	}
	return p
}

// SavePart writes the invocation's results so far to path, whole or not
// at all (a crash mid-write leaves the previous save).
func (rep *Report) SavePart(path string) error {
	b, err := json.MarshalIndent(rep.Part(), "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadParts reads saved parts and merges them into one report: the runs
// of all, each scenario's slowest timeline among them. A scenario and
// seed run in two parts is an error (it would count twice), as is a
// scenario this build does not know.
func LoadParts(paths []string) (*Report, error) {
	rep := &Report{}
	seen := map[string]string{}
	var commits, commands, budgets []string
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("chaos part: %w", err)
		}
		var p Part
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("chaos part %s: %w", path, err)
		}
		if len(p.Runs) == 0 {
			return nil, fmt.Errorf("chaos part %s: no runs", path)
		}
		if err := rep.addPart(path, p, seen); err != nil {
			return nil, err
		}
		seeds := make([]int64, 0, len(p.Runs))
		for _, r := range p.Runs {
			seeds = append(seeds, r.Seed)
		}
		commits = append(commits, fmt.Sprintf("%s (seeds %s, %s, %d runs in %s)", p.Commit, seedList(dedupSeeds(seeds)),
			p.Started.UTC().Format("2006-01-02 15:04 MST"), len(p.Runs), p.Took.Round(time.Second)))
		if !slices.Contains(commands, p.Command) {
			commands = append(commands, p.Command)
		}
		if p.Budget != "" {
			budgets = append(budgets, p.Budget)
		}
	}
	rep.Commit = strings.Join(commits, "; ")
	rep.Command = strings.Join(commands, "`, `")
	rep.Budget = strings.Join(budgets, " ")
	rep.Parts = len(paths)
	return rep, nil
}

// addPart adds one part's runs and timelines to rep.
func (rep *Report) addPart(path string, p Part, seen map[string]string) error {
	if rep.Started.IsZero() || p.Started.Before(rep.Started) {
		rep.Started = p.Started
	}
	rep.Took += p.Took
	if rep.LogsDir == "" && len(p.Runs) > 0 {
		rep.LogsDir = filepath.Dir(filepath.Dir(p.Runs[0].Dir))
	}
	for _, pr := range p.Runs {
		i := slices.IndexFunc(Scenarios, func(s *Scenario) bool { return s.Name == pr.Scenario })
		if i < 0 {
			return fmt.Errorf("chaos part %s: no scenario %q in this build", path, pr.Scenario)
		}
		key := fmt.Sprintf("%s seed %d", pr.Scenario, pr.Seed)
		if other, dup := seen[key]; dup {
			return fmt.Errorf("chaos parts %s and %s both ran %s", other, path, key)
		}
		seen[key] = path
		r := &Run{Scenario: Scenarios[i], Seed: pr.Seed, Verdict: pr.Verdict, Dir: pr.Dir, Took: pr.Took}
		if pr.Err != "" {
			r.Err = errors.New(pr.Err)
		}
		rep.Add(r)
	}
	for name, s := range p.Slowest {
		if cur := rep.Slowest[name]; cur == nil || s.Unavailable > cur.Unavailable {
			if rep.Slowest == nil {
				rep.Slowest = map[string]*Slowest{}
			}
			rep.Slowest[name] = s
		}
	}
	return nil
}

func dedupSeeds(seeds []int64) []int64 {
	s := slices.Clone(seeds)
	slices.Sort(s)
	return slices.Compact(s)
}
