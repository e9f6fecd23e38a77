package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// readConf reads a Pulsar-style configuration file: key=value lines, '#'
// comments, blank lines ignored. A malformed line is an error naming the
// file and line.
func readConf(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	return parseConf(f, path)
}

func parseConf(r io.Reader, name string) (map[string]string, error) {
	conf := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("config %s:%d: want key=value, got %q", name, n, line)
		}
		conf[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	return conf, nil
}

// confSetter applies one key's value.
type confSetter func(value string) error

func setString(p *string) confSetter { return func(v string) error { *p = v; return nil } }

func setInt(p *int) confSetter {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*p = n
		return nil
	}
}

// setNonNegInt is setInt for counts where a negative number means nothing.
func setNonNegInt(p *int) confSetter {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative integer (0: unbounded), got %q", v)
		}
		*p = n
		return nil
	}
}

// setNegatedBool stores the opposite of a boolean key, for settings whose
// Go zero value must mean the key's default of true.
func setNegatedBool(p *bool) confSetter {
	return func(v string) error {
		var b bool
		if err := setBool(&b)(v); err != nil {
			return err
		}
		*p = !b
		return nil
	}
}

func setBool(p *bool) confSetter {
	return func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		*p = b
		return nil
	}
}

// setDuration reads a non-negative count of unit (0 allowed: off).
// setDuration reads a count of unit. Fractions are accepted (Pulsar takes
// integers only): loadBalancerSheddingIntervalMinutes=0.05 is 3 s, handy
// for tests and demonstrations.
func setDuration(p *time.Duration, unit time.Duration) confSetter {
	return func(v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative number, got %q", v)
		}
		*p = time.Duration(n * float64(unit))
		return nil
	}
}

func setSeconds(p *time.Duration) confSetter {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive number of seconds, got %q", v)
		}
		*p = time.Duration(n) * time.Second
		return nil
	}
}

// applyConf sets the known keys (skipping those set by flags) and warns
// about the rest: Pulsar configuration files carry many keys this build
// does not use yet, and refusing them would break existing files.
func applyConf(conf map[string]string, known map[string]confSetter, setByFlag map[string]bool, log *slog.Logger, file string) error {
	var unknown []string
	for k, v := range conf {
		set, ok := known[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		if setByFlag[k] {
			continue
		}
		if err := set(v); err != nil {
			return fmt.Errorf("config %s: %s: %w", file, k, err)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		log.Warn("config keys not used by this build", "file", file, "keys", strings.Join(unknown, ","))
	}
	return nil
}

func setFloat(p *float64) confSetter {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", v)
		}
		*p = f
		return nil
	}
}

func setInt64(p *int64) confSetter {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*p = n
		return nil
	}
}

// setList reads a comma-separated list (journalDirectories, ledgerDirectories).
func setList(p *string) confSetter { return setString(p) }

// setNonNegInt64 is setInt64 for sizes where a negative number means
// nothing.
func setNonNegInt64(p *int64) confSetter {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative integer (0: off), got %q", v)
		}
		*p = n
		return nil
	}
}
