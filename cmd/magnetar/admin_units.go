package main

// Flag values in pulsar-admin's formats: relative times (RelativeTimeUtil:
// 30, 30s, 10m, 3h, 2d, 5w, 1y; no unit is seconds) and sizes
// (validateSizeString: 4096, 10k, 10M, 16G, 3T; no unit is bytes, units
// are powers of 1024). Errors are usage errors naming the flag.

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// timeUnits are RelativeTimeUtil's units in seconds (no months).
var timeUnits = map[byte]int64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400, 'y': 365 * 86400}

// sizeUnits are validateSizeString's units in bytes.
var sizeUnits = map[byte]int64{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30, 't': 1 << 40}

// parseRelativeTime parses a relative time into seconds; it must not be
// negative.
func parseRelativeTime(flagName, s string) (int64, error) {
	n, err := parseScaled(s, timeUnits)
	if err != nil || n < 0 {
		return 0, usageErrorf("--%s: bad time %q: want a number of seconds or a number with a unit s, m, h, d, w or y (e.g. 100m, 3h, 2d)", flagName, s)
	}
	return n, nil
}

// parseSize parses a size into bytes; it must not be negative.
func parseSize(flagName, s string) (int64, error) {
	n, err := parseScaled(s, sizeUnits)
	if err != nil || n < 0 {
		return 0, usageErrorf("--%s: bad size %q: want a number of bytes or a number with a unit k, M, G or T (e.g. 10M, 16G)", flagName, s)
	}
	return n, nil
}

// parseScaled parses a decimal integer with an optional one-letter unit
// (case-insensitive) from units; no unit is a factor of 1.
func parseScaled(s string, units map[byte]int64) (int64, error) {
	if s == "" {
		return 0, strconv.ErrSyntax
	}
	factor := int64(1)
	num := s
	if last := strings.ToLower(s[len(s)-1:])[0]; last < '0' || last > '9' {
		f, ok := units[last]
		if !ok {
			return 0, strconv.ErrSyntax
		}
		factor, num = f, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt64/factor || n < math.MinInt64/factor {
		return 0, strconv.ErrRange
	}
	return n * factor, nil
}

// parseRetention turns set-retention's --time and --size into Pulsar's
// RetentionPolicies (minutes and MiB, -1 for unlimited), as pulsar-admin
// does: 0 is no retention, and values are truncated to whole units.
func parseRetention(timeStr, sizeStr string) (utils.RetentionPolicies, error) {
	var p utils.RetentionPolicies
	if timeStr == "" || sizeStr == "" {
		return p, usageErrorf("--time and --size are both required")
	}
	minutes, mib := -1, int64(-1)
	if timeStr != "-1" {
		sec, err := parseRelativeTime("time", timeStr)
		if err != nil {
			return p, err
		}
		if sec/60 > math.MaxInt32 {
			return p, usageErrorf("--time %q: too long", timeStr)
		}
		minutes = int(sec / 60)
	}
	if sizeStr != "-1" {
		b, err := parseSize("size", sizeStr)
		if err != nil {
			return p, err
		}
		mib = b >> 20
	}
	return utils.RetentionPolicies{RetentionTimeInMinutes: minutes, RetentionSizeInMB: mib}, nil
}

// parseSecondsInt is parseRelativeTime for int API fields (TTL).
func parseSecondsInt(flagName, s string) (int, error) {
	sec, err := parseRelativeTime(flagName, s)
	if err != nil {
		return 0, err
	}
	if sec > math.MaxInt32 {
		return 0, usageErrorf("--%s %q: too long", flagName, s)
	}
	return int(sec), nil
}

// timeAgo is the epoch-milliseconds timestamp seconds before now, or 0
// (the epoch) for a time before it.
func timeAgo(now time.Time, seconds int64) int64 {
	ms := now.UnixMilli()
	if seconds > ms/1000 {
		return 0
	}
	return ms - seconds*1000
}
