package main

// magnetar admin brokers (list, leader-broker, healthcheck, namespaces,
// the dynamic-configuration commands) and broker-stats (load-report), as
// pulsar-admin's.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

func brokerCmds() []adminCmd {
	cmds := []adminCmd{
		{"list", []string{"CLUSTER"}, "list a cluster's active brokers", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			brokers, err := env.api.Brokers().GetActiveBrokers(args[0])
			return replyLines(brokers), err
		})},
		{"leader-broker", nil, "show the leader broker (it runs the load manager)", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			info, err := env.api.Brokers().GetLeaderBroker()
			return replyObject(info), err
		})},
		{"healthcheck", nil, "check that the broker serves; prints ok", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			if err := env.api.Brokers().HealthCheckWithTopicVersion(utils.TopicVersionV2); err != nil {
				return replyNone(), err
			}
			return replyText("ok", func(w io.Writer) { fmt.Fprintln(w, "ok") }), nil
		})},
		{"namespaces", []string{"CLUSTER"}, "list the bundles a broker owns", func(fs *flag.FlagSet) adminAction {
			broker := fs.String("url", "", "the broker, as brokers list names it (host:port) (required)")
			return func(env *adminEnv, args []string) (adminReply, error) {
				if *broker == "" {
					return replyNone(), usageErrorf("--url is required")
				}
				owned, err := env.api.Brokers().GetOwnedNamespaces(args[0], *broker)
				if owned == nil {
					owned = map[string]utils.NamespaceOwnershipStatus{}
				}
				return replyText(owned, func(w io.Writer) {
					rows := make([][]string, 0, len(owned))
					for b, s := range owned {
						rows = append(rows, []string{b, string(s.BrokerAssignment), fmt.Sprint(s.IsControlled), fmt.Sprint(s.IsActive)})
					}
					writeTable(w, []string{"BUNDLE", "ASSIGNMENT", "CONTROLLED", "ACTIVE"}, sortedRows(rows))
				}), err
			}
		}},
	}
	return append(cmds, dynamicConfigCmds()...)
}

// dynamicConfigCmds are pulsar-admin's brokers *-dynamic-config and
// get-runtime-config / get-internal-config.
func dynamicConfigCmds() []adminCmd {
	return []adminCmd{
		{"list-dynamic-config", nil, "list the settings update-dynamic-config accepts", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			names, err := env.api.Brokers().GetDynamicConfigurationNames()
			return replyLines(names), err
		})},
		{"get-all-dynamic-config", nil, "show the dynamic-configuration overrides stored for every broker", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			values, err := env.api.Brokers().GetAllDynamicConfigurations()
			return replyKeyValues(values), err
		})},
		{"update-dynamic-config", nil, "set a dynamic setting on every broker (kept in the configuration store)", func(fs *flag.FlagSet) adminAction {
			name := fs.String("config", "", "the setting, e.g. dispatcherMaxReadBatchSize (required)")
			value := fs.String("value", "", "its new value (required)")
			return func(env *adminEnv, _ []string) (adminReply, error) {
				if *name == "" || *value == "" {
					return replyNone(), usageErrorf("--config and --value are required")
				}
				return replyNone(), env.api.Brokers().UpdateDynamicConfiguration(*name, *value)
			}
		}},
		{"delete-dynamic-config", nil, "remove an override: brokers go back to their configuration file's value", func(fs *flag.FlagSet) adminAction {
			name := fs.String("config", "", "the setting (required)")
			return func(env *adminEnv, _ []string) (adminReply, error) {
				if *name == "" {
					return replyNone(), usageErrorf("--config is required")
				}
				return replyNone(), env.api.Brokers().DeleteDynamicConfiguration(*name)
			}
		}},
		{"get-runtime-config", nil, "show the settings in effect on the broker", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			values, err := env.api.Brokers().GetRuntimeConfigurations()
			return replyKeyValues(values), err
		})},
		{"get-internal-config", nil, "show the metadata stores the broker uses", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			data, err := env.api.Brokers().GetInternalConfigurationData()
			return replyObject(data), err
		})},
	}
}

// replyKeyValues prints a settings map as sorted "key=value" lines.
func replyKeyValues(values map[string]string) adminReply {
	if values == nil {
		values = map[string]string{}
	}
	return replyText(values, func(w io.Writer) {
		rows := make([][]string, 0, len(values))
		for k, v := range values {
			rows = append(rows, []string{k, v})
		}
		for _, r := range sortedRows(rows) {
			fmt.Fprintf(w, "%s=%s\n", r[0], r[1])
		}
	})
}

func brokerStatsCmds() []adminCmd {
	return []adminCmd{
		{"load-report", nil, "show the broker's load report (usage, rates, bundles)", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			r, err := getLoadReport(env)
			return replyText(r, func(w io.Writer) { writeLoadReport(w, r) }), err
		})},
		{"topics", nil, "show every loaded topic's stats, by namespace and bundle (JSON)", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			raw, err := env.api.BrokerStats().GetTopics()
			var v any
			if err == nil {
				err = json.Unmarshal([]byte(raw), &v)
			}
			return replyObject(v), err
		})},
		{"monitoring-metrics", nil, "show the broker's and each namespace's rates and counts", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			m, err := env.api.BrokerStats().GetMetrics()
			return replyObject(m), err
		})},
		{"mbeans", nil, "JVM MBeans in Pulsar; Magnetar has none (an empty list)", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			m, err := env.api.BrokerStats().GetMBeans()
			return replyObject(m), err
		})},
	}
}

// writeLoadReport prints the broker, its resource usage as usage/limit,
// its totals and a table of its bundles.
func writeLoadReport(w io.Writer, r utils.LocalBrokerData) {
	fmt.Fprintf(w, "webServiceUrl: %s\npulsarServiceUrl: %s\nversion: %s\n", r.WebServiceURL, r.PulsarServiceURL, r.BrokerVersionString)
	if r.LastUpdate > 0 {
		fmt.Fprintf(w, "lastUpdate: %s\n", time.UnixMilli(r.LastUpdate).UTC().Format(time.RFC3339))
	}
	for _, u := range []struct {
		name string
		u    utils.ResourceUsage
	}{{"cpu", r.CPU}, {"memory", r.Memory}, {"directMemory", r.DirectMemory}, {"bandwidthIn", r.BandwidthIn}, {"bandwidthOut", r.BandwidthOut}} {
		fmt.Fprintf(w, "%s: %.2f/%.2f\n", u.name, u.u.Usage, u.u.Limit)
	}
	fmt.Fprintf(w, "msgRateIn: %.2f\nmsgRateOut: %.2f\nmsgThroughputIn: %.2f\nmsgThroughputOut: %.2f\n",
		r.MsgRateIn, r.MsgRateOut, r.MsgThroughputIn, r.MsgThroughputOut)
	fmt.Fprintf(w, "numTopics: %d\nnumBundles: %d\nnumProducers: %d\nnumConsumers: %d\n", r.NumTopics, r.NumBundles, r.NumProducers, r.NumConsumers)
	if len(r.LastStats) == 0 {
		return
	}
	fmt.Fprintln(w)
	rows := make([][]string, 0, len(r.LastStats))
	for b, s := range r.LastStats {
		if s == nil {
			continue
		}
		rows = append(rows, []string{b, fmt.Sprint(s.TopicsNum), fmt.Sprint(s.ProducerCount), fmt.Sprint(s.ConsumerCount),
			fmt.Sprintf("%.2f", s.MsgRateIn), fmt.Sprintf("%.2f", s.MsgRateOut)})
	}
	writeTable(w, []string{"BUNDLE", "TOPICS", "PRODUCERS", "CONSUMERS", "RATE-IN", "RATE-OUT"}, sortedRows(rows))
}
