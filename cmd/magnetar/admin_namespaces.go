package main

// magnetar admin namespaces: namespaces (list, create, delete, policies,
// topics), their bundles (bundles, unload, split-bundle) and policies
// (retention, message TTL, backlog quotas, deduplication, replication
// clusters, permissions, producer and consumer limits, schema
// compatibility, persistence and bookie affinity: admin_persistence.go,
// replicator dispatch rate: admin_dispatchrate.go),
// with pulsar-admin's names and value formats.

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// nsAction is a command about one namespace.
type nsAction func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error)

// parseNamespace checks a tenant/namespace argument.
func parseNamespace(s string) (*utils.NameSpaceName, error) {
	ns, err := utils.GetNamespaceName(s)
	if err != nil {
		return nil, usageErrorf("bad namespace %q: want tenant/namespace (%v)", s, err)
	}
	return ns, nil
}

// nsCmd is a namespace command whose setup defines its flags.
func nsCmd(name, summary string, setup func(fs *flag.FlagSet) nsAction) adminCmd {
	return adminCmd{name, []string{"TENANT/NAMESPACE"}, summary, func(fs *flag.FlagSet) adminAction {
		run := setup(fs)
		return func(env *adminEnv, args []string) (adminReply, error) {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return replyNone(), err
			}
			return run(env, ns)
		}
	}}
}

// nsPlain is a namespace command without flags.
func nsPlain(name, summary string, run nsAction) adminCmd {
	return nsCmd(name, summary, func(*flag.FlagSet) nsAction { return run })
}

// optional is a policy value the API answers as -1 when it is not set.
func optional(v int) *int {
	if v < 0 {
		return nil
	}
	return &v
}

func namespaceCmds() []adminCmd {
	cmds := []adminCmd{
		{"list", []string{"TENANT"}, "list a tenant's namespaces", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			names, err := env.api.Namespaces().GetNamespaces(args[0])
			return replyLines(names), err
		})},
		nsCmd("create", "create a namespace", nsCreate),
		nsPlain("delete", "delete a namespace (it must have no topics)", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			return replyNone(), env.api.Namespaces().DeleteNamespace(ns.String())
		}),
		nsPlain("policies", "show all of a namespace's policies", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			p, err := env.api.Namespaces().GetPolicies(ns.String())
			return replyObject(p), err
		}),
		nsPlain("topics", "list a namespace's topics", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			topics, err := env.api.Namespaces().GetTopics(ns.String())
			return replyLines(topics), err
		}),
		nsPlain("bundles", "list a namespace's bundles (hash ranges, as unload and split-bundle take them)", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			b, err := getBundles(env, ns)
			return replyText(b, func(w io.Writer) {
				for i := 0; i+1 < len(b.Boundaries); i++ {
					fmt.Fprintf(w, "%s_%s\n", b.Boundaries[i], b.Boundaries[i+1])
				}
			}), err
		}),
		nsCmd("unload", "unload a namespace, or one bundle of it, from its brokers", func(fs *flag.FlagSet) nsAction {
			bundle := fs.String("bundle", "", "bundle range to unload (e.g. 0x00000000_0x40000000); default all")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *bundle == "" {
					return replyNone(), env.api.Namespaces().Unload(ns.String())
				}
				return replyNone(), env.api.Namespaces().UnloadNamespaceBundle(ns.String(), *bundle)
			}
		}),
		nsCmd("split-bundle", "split a bundle of a namespace in two", func(fs *flag.FlagSet) nsAction {
			bundle := fs.String("bundle", "", "bundle range to split (required)")
			unload := fs.Bool("unload", false, "unload the new bundles after the split")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *bundle == "" {
					return replyNone(), usageErrorf("--bundle is required")
				}
				return replyNone(), env.api.Namespaces().SplitNamespaceBundle(ns.String(), *bundle, *unload)
			}
		}),
	}
	cmds = append(cmds, retentionCmds()...)
	cmds = append(cmds, backlogQuotaCmds()...)
	cmds = append(cmds, accessCmds()...)
	cmds = append(cmds, persistenceCmds()...)
	cmds = append(cmds, dispatchRateCmds()...)
	return append(cmds, limitCmds()...)
}

func nsCreate(fs *flag.FlagSet) nsAction {
	bundles := fs.Int("bundles", 0, "number of bundles (default: the broker's defaultNumberOfNamespaceBundles)")
	clusters := fs.String("clusters", "", "comma-separated replication clusters (default: the broker's cluster)")
	return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
		if *bundles < 0 {
			return replyNone(), usageErrorf("--bundles %d: want a positive number", *bundles)
		}
		if *clusters == "" {
			if *bundles == 0 {
				return replyNone(), env.api.Namespaces().CreateNamespace(ns.String())
			}
			return replyNone(), env.api.Namespaces().CreateNsWithNumBundles(ns.String(), *bundles)
		}
		p := utils.NewDefaultPolicies()
		p.ReplicationClusters = splitList(*clusters)
		if *bundles > 0 {
			p.Bundles = utils.NewBundlesDataWithNumBundles(*bundles)
		}
		return replyNone(), env.api.Namespaces().CreateNsWithPolices(ns.String(), *p)
	}
}

func retentionCmds() []adminCmd {
	return []adminCmd{
		nsCmd("set-retention", "set the retention of acknowledged messages", func(fs *flag.FlagSet) nsAction {
			t := fs.String("time", "", "retention time: 100m, 3h, 2d, 5w, seconds without a unit; 0 none, -1 unlimited (required)")
			size := fs.String("size", "", "retention size: 10M, 16G, 3T, bytes without a unit; 0 none, -1 unlimited (required)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				p, err := parseRetention(*t, *size)
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Namespaces().SetRetention(ns.String(), p)
			}
		}),
		nsPlain("get-retention", "show the retention (minutes and MB; -1 unlimited)", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			p, err := env.api.Namespaces().GetRetention(ns.String())
			return replyObject(p), err
		}),
		nsPlain("remove-retention", "remove the retention policy (the broker's default applies)", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			return replyNone(), env.api.Namespaces().RemoveRetention(ns.String())
		}),
		nsCmd("set-message-ttl", "set the time after which unacknowledged messages expire", func(fs *flag.FlagSet) nsAction {
			ttl := fs.String("ttl", "", "message TTL: 100m, 3h, 2d, 5w, seconds without a unit; 0 disables (required)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *ttl == "" {
					return replyNone(), usageErrorf("--ttl is required")
				}
				sec, err := parseSecondsInt("ttl", *ttl)
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Namespaces().SetNamespaceMessageTTL(ns.String(), sec)
			}
		}),
		nsPlain("get-message-ttl", "show the message TTL in seconds", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			ttl, err := env.api.Namespaces().GetNamespaceMessageTTL(ns.String())
			return replyObject(optional(ttl)), err
		}),
		nsPlain("remove-message-ttl", "remove the message TTL (the broker's default applies)", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			return replyNone(), env.api.Namespaces().RemoveNamespaceMessageTTL(ns.String())
		}),
	}
}

// parseBacklogQuotaType checks --type.
func parseBacklogQuotaType(s string) (utils.BacklogQuotaType, error) {
	t, err := utils.ParseBacklogQuotaType(s)
	if err != nil {
		return "", usageErrorf("--type %q: want destination_storage or message_age", s)
	}
	return t, nil
}

func backlogQuotaCmds() []adminCmd {
	return []adminCmd{
		nsCmd("set-backlog-quota", "set a backlog quota and what happens when it is exceeded", func(fs *flag.FlagSet) nsAction {
			size := fs.String("limit-size", "", "backlog size limit: 10M, 16G, bytes without a unit (required for destination_storage)")
			limitTime := fs.String("limit-time", "", "backlog age limit: 100m, 3h, 2d, seconds without a unit (required for message_age)")
			policy := fs.String("policy", "", "producer_request_hold, producer_exception or consumer_backlog_eviction (required)")
			typ := fs.String("type", string(utils.DestinationStorage), "quota type: destination_storage or message_age")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				q, t, err := parseBacklogQuota(*size, *limitTime, *policy, *typ)
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Namespaces().SetBacklogQuota(ns.String(), q, t)
			}
		}),
		nsPlain("get-backlog-quotas", "show the backlog quotas by type", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			m, err := env.api.Namespaces().GetBacklogQuotaMap(ns.String())
			if m == nil {
				m = map[utils.BacklogQuotaType]utils.BacklogQuota{}
			}
			return replyText(m, func(w io.Writer) {
				rows := make([][]string, 0, len(m))
				for t, q := range m {
					rows = append(rows, []string{string(t), fmt.Sprint(q.LimitSize), fmt.Sprint(q.LimitTime), string(q.Policy)})
				}
				writeTable(w, []string{"TYPE", "LIMIT-SIZE", "LIMIT-TIME", "POLICY"}, sortedRows(rows))
			}), err
		}),
		nsCmd("remove-backlog-quota", "remove a backlog quota", func(fs *flag.FlagSet) nsAction {
			typ := fs.String("type", string(utils.DestinationStorage), "quota type: destination_storage or message_age")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				t, err := parseBacklogQuotaType(*typ)
				switch {
				case err != nil:
					return replyNone(), err
				case t == utils.DestinationStorage:
					return replyNone(), env.api.Namespaces().RemoveBacklogQuota(ns.String())
				}
				return replyNone(), removeBacklogQuota(env, ns, t)
			}
		}),
	}
}

// parseBacklogQuota builds a quota as pulsar-admin's set-backlog-quota:
// the limit its type needs is required, a limit not given is -1.
func parseBacklogQuota(size, limitTime, policy, typ string) (utils.BacklogQuota, utils.BacklogQuotaType, error) {
	t, err := parseBacklogQuotaType(typ)
	if err != nil {
		return utils.BacklogQuota{}, t, err
	}
	p, err := utils.ParseRetentionPolicy(policy)
	if err != nil {
		return utils.BacklogQuota{}, t, usageErrorf("--policy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", policy)
	}
	q := utils.NewBacklogQuota(-1, -1, p)
	switch {
	case t == utils.DestinationStorage && size == "":
		return q, t, usageErrorf("--limit-size is required for quota type destination_storage")
	case t == utils.MessageAge && limitTime == "":
		return q, t, usageErrorf("--limit-time is required for quota type message_age")
	}
	if size != "" {
		if q.LimitSize, err = parseSize("limit-size", size); err != nil {
			return q, t, err
		}
	}
	if limitTime != "" {
		if q.LimitTime, err = parseRelativeTime("limit-time", limitTime); err != nil {
			return q, t, err
		}
	}
	return q, t, nil
}

func accessCmds() []adminCmd {
	return []adminCmd{
		nsCmd("set-deduplication", "enable or disable message deduplication", func(fs *flag.FlagSet) nsAction {
			enable := fs.Bool("enable", false, "enable deduplication")
			disable := fs.Bool("disable", false, "disable deduplication")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *enable == *disable {
					return replyNone(), usageErrorf("give exactly one of --enable and --disable")
				}
				return replyNone(), env.api.Namespaces().SetDeduplicationStatus(ns.String(), *enable)
			}
		}),
		nsCmd("set-clusters", "set the clusters the namespace replicates to", func(fs *flag.FlagSet) nsAction {
			clusters := fs.String("clusters", "", "comma-separated cluster names (required)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				list := splitList(*clusters)
				if len(list) == 0 {
					return replyNone(), usageErrorf("--clusters is required")
				}
				return replyNone(), env.api.Namespaces().SetNamespaceReplicationClusters(ns.String(), list)
			}
		}),
		nsPlain("get-clusters", "list the clusters the namespace replicates to", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			list, err := env.api.Namespaces().GetNamespaceReplicationClusters(ns.String())
			return replyLines(list), err
		}),
		nsCmd("grant-permission", "grant a role actions on the namespace", func(fs *flag.FlagSet) nsAction {
			role := fs.String("role", "", "client role (required)")
			actions := fs.String("actions", "", "comma-separated actions: produce, consume, functions, sources, sinks, packages (required)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				list, err := roleActions(*role, *actions)
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Namespaces().GrantNamespacePermission(*ns, *role, list)
			}
		}),
		nsCmd("revoke-permission", "revoke a role's actions on the namespace", func(fs *flag.FlagSet) nsAction {
			role := fs.String("role", "", "client role (required)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *role == "" {
					return replyNone(), usageErrorf("--role is required")
				}
				return replyNone(), env.api.Namespaces().RevokeNamespacePermission(*ns, *role)
			}
		}),
		nsPlain("permissions", "show the roles and their actions", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			m, err := env.api.Namespaces().GetNamespacePermissions(*ns)
			if m == nil {
				m = map[string][]utils.AuthAction{}
			}
			return replyObject(m), err
		}),
		nsCmd("grant-subscription-permission", "let roles consume a subscription (then only they may)", func(fs *flag.FlagSet) nsAction {
			sub := fs.String("subscription", "", "subscription name (required)")
			roles := fs.String("roles", "", "comma-separated client roles (required)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *sub == "" || len(splitList(*roles)) == 0 {
					return replyNone(), usageErrorf("--subscription and --roles are required")
				}
				return replyNone(), env.api.Namespaces().GrantSubPermission(*ns, *sub, splitList(*roles))
			}
		}),
		nsCmd("revoke-subscription-permission", "remove a role from those that may consume a subscription", func(fs *flag.FlagSet) nsAction {
			sub := fs.String("subscription", "", "subscription name (required)")
			role := fs.String("role", "", "client role (required)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *sub == "" || *role == "" {
					return replyNone(), usageErrorf("--subscription and --role are required")
				}
				return replyNone(), env.api.Namespaces().RevokeSubPermission(*ns, *sub, *role)
			}
		}),
		nsPlain("subscription-permissions", "show the roles that may consume each subscription", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			m, err := env.api.Namespaces().GetSubPermissions(*ns)
			if m == nil {
				m = map[string][]string{}
			}
			return replyObject(m), err
		}),
	}
}

// roleActions checks --role and --actions and parses the actions
// (produce, consume, functions, sources, sinks, packages).
func roleActions(role, actions string) ([]utils.AuthAction, error) {
	if role == "" || actions == "" {
		return nil, usageErrorf("--role and --actions are required")
	}
	var list []utils.AuthAction
	for _, a := range splitList(actions) {
		act, err := utils.ParseAuthAction(a)
		if err != nil {
			return nil, usageErrorf("--actions: %v", err)
		}
		list = append(list, act)
	}
	return list, nil
}

func limitCmds() []adminCmd {
	limit := func(what string, set func(env *adminEnv, ns utils.NameSpaceName, n int) error,
		get func(env *adminEnv, ns utils.NameSpaceName) (int, error)) []adminCmd {
		name := "max-" + what + "-per-topic"
		return []adminCmd{
			nsCmd("set-"+name, "set the most "+what+" a topic may have", func(fs *flag.FlagSet) nsAction {
				n := fs.Int(name, -1, "the limit; 0 is no limit (required)")
				return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
					if *n < 0 {
						return replyNone(), usageErrorf("--%s is required and must not be negative", name)
					}
					return replyNone(), set(env, *ns, *n)
				}
			}),
			nsPlain("get-"+name, "show the most "+what+" a topic may have", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				n, err := get(env, *ns)
				return replyObject(optional(n)), err
			}),
		}
	}
	cmds := limit("producers",
		func(env *adminEnv, ns utils.NameSpaceName, n int) error {
			return env.api.Namespaces().SetMaxProducersPerTopic(ns, n)
		},
		func(env *adminEnv, ns utils.NameSpaceName) (int, error) {
			return env.api.Namespaces().GetMaxProducersPerTopic(ns)
		})
	cmds = append(cmds, limit("consumers",
		func(env *adminEnv, ns utils.NameSpaceName, n int) error {
			return env.api.Namespaces().SetMaxConsumersPerTopic(ns, n)
		},
		func(env *adminEnv, ns utils.NameSpaceName) (int, error) {
			return env.api.Namespaces().GetMaxConsumersPerTopic(ns)
		})...)
	return append(cmds,
		nsCmd("set-schema-compatibility-strategy", "set how new schemas must relate to the existing ones", func(fs *flag.FlagSet) nsAction {
			c := fs.String("compatibility", "", "strategy: "+strings.Join(schemaStrategies, ", ")+" (required)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				s, err := utils.ParseSchemaCompatibilityStrategy(strings.ToUpper(*c))
				if err != nil {
					return replyNone(), usageErrorf("--compatibility %q: want one of %s", *c, strings.Join(schemaStrategies, ", "))
				}
				return replyNone(), env.api.Namespaces().SetSchemaCompatibilityStrategy(*ns, s)
			}
		}),
		nsPlain("get-schema-compatibility-strategy", "show the schema compatibility strategy", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			s, err := env.api.Namespaces().GetSchemaCompatibilityStrategy(*ns)
			return replyObject(s), err
		}),
	)
}

// schemaStrategies are the values of --compatibility.
var schemaStrategies = []string{"UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
	"BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"}
