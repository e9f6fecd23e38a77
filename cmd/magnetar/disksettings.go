package main

import (
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
)

// diskSettings are BookKeeper's disk-usage keys (bk_server.conf), read by
// standalone for its in-process bookie. Zero values take the bookie's
// defaults (0.95, 0.90, 10 s; warn 0.90).
type diskSettings struct {
	threshold, warn, lwm float64
	checkInterval        time.Duration
	// usage measures a directory; nil is statfs (tests fill disks here).
	usage bookie.DiskUsageFunc
}

func (d *diskSettings) confKeys() map[string]confSetter {
	return map[string]confSetter{
		"diskUsageThreshold":     setFloat(&d.threshold),
		"diskUsageWarnThreshold": setFloat(&d.warn),
		"diskUsageLwmThreshold":  setFloat(&d.lwm),
		"diskCheckInterval":      setDuration(&d.checkInterval, time.Millisecond),
	}
}

// validate checks the thresholds are fractions in the order BookKeeper
// requires: lwm <= threshold, warn <= threshold.
func (d diskSettings) validate() error {
	for name, v := range map[string]float64{"diskUsageThreshold": d.threshold, "diskUsageWarnThreshold": d.warn, "diskUsageLwmThreshold": d.lwm} {
		if v < 0 || v > 1 {
			return fmt.Errorf("%s %v: want a fraction between 0 and 1", name, v)
		}
	}
	th := d.threshold
	if th == 0 {
		th = 0.95
	}
	if d.lwm > th {
		return fmt.Errorf("diskUsageLwmThreshold %.2f is above diskUsageThreshold %.2f", d.lwm, th)
	}
	if d.warn > th {
		return fmt.Errorf("diskUsageWarnThreshold %.2f is above diskUsageThreshold %.2f", d.warn, th)
	}
	return nil
}

// options puts the settings into a bookie's Options.
func (d diskSettings) options(o bookie.Options) bookie.Options {
	o.DiskUsageThreshold, o.DiskUsageWarnThreshold, o.DiskUsageLwmThreshold = d.threshold, d.warn, d.lwm
	o.DiskCheckInterval, o.DiskUsage = d.checkInterval, d.usage
	return o
}
