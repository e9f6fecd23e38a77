package main

// magnetar admin transactions: pulsar-admin's transactions commands over
// /admin/v3/transactions (pulsaradmin v0.19 has no calls for them).

import (
	"flag"
	"net/url"
	"strconv"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// txnPath is an /admin/v3/transactions path with each part escaped.
func txnPath(parts ...string) string {
	esc := make([]string, len(parts))
	for i, p := range parts {
		esc[i] = url.PathEscape(p)
	}
	return "/admin/v3/transactions/" + strings.Join(esc, "/")
}

// txnTopicParts are a topic's {domain}/{tenant}/{namespace}/{topic}.
func txnTopicParts(name string) ([]string, error) {
	t, err := utils.GetTopicName(name)
	if err != nil {
		return nil, usageErrorf("topic %q: %v", name, err)
	}
	rest := strings.TrimPrefix(t.String(), string(t.GetDomain())+"://")
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return nil, usageErrorf("topic %q: want tenant/namespace/topic", name)
	}
	return append([]string{string(t.GetDomain())}, parts...), nil
}

// txnIDFlags adds --most-sig-bits and --least-sig-bits (pulsar-admin's -m, -l).
func txnIDFlags(fs *flag.FlagSet) (most, least *string) {
	most = fs.String("most-sig-bits", "", "the transaction id's most significant bits (its coordinator) (required)")
	least = fs.String("least-sig-bits", "", "the transaction id's least significant bits (required)")
	return most, least
}

func checkTxnID(most, least string) error {
	if _, err := strconv.ParseUint(most, 10, 64); err != nil {
		return usageErrorf("--most-sig-bits %q: want a number", most)
	}
	if _, err := strconv.ParseUint(least, 10, 64); err != nil {
		return usageErrorf("--least-sig-bits %q: want a number", least)
	}
	return nil
}

func transactionCmds() []adminCmd {
	return []adminCmd{
		scaleCmd,
		{"coordinator-stats", nil, "show the transaction coordinators' stats (of the brokers' own, or one with --coordinator-id)", func(fs *flag.FlagSet) adminAction {
			id := fs.String("coordinator-id", "", "one coordinator")
			return func(env *adminEnv, _ []string) (adminReply, error) {
				var out any
				var err error
				if *id != "" {
					_, err = env.raw.GetWithQueryParams(txnPath("coordinatorStats"), &out, map[string]string{"coordinatorId": *id}, true)
				} else {
					err = env.raw.Get(txnPath("coordinatorStats"), &out)
				}
				return replyObject(out), err
			}
		}},
		{"transaction-metadata", nil, "show a transaction's status, partitions and subscriptions", func(fs *flag.FlagSet) adminAction {
			most, least := txnIDFlags(fs)
			return func(env *adminEnv, _ []string) (adminReply, error) {
				if err := checkTxnID(*most, *least); err != nil {
					return replyNone(), err
				}
				var out any
				err := env.raw.Get(txnPath("transactionMetadata", *most, *least), &out)
				return replyObject(out), err
			}
		}},
		{"slow-transactions", nil, "list the transactions open longer than --time", func(fs *flag.FlagSet) adminAction {
			d := fs.Duration("time", 0, "how long open, e.g. 30s (required)")
			return func(env *adminEnv, _ []string) (adminReply, error) {
				if *d <= 0 {
					return replyNone(), usageErrorf("--time is required")
				}
				var out any
				err := env.raw.Get(txnPath("slowTransactions", strconv.FormatInt(d.Milliseconds(), 10)), &out)
				return replyObject(out), err
			}
		}},
		{"abort-transaction", nil, "abort an open transaction (an operator's way out of a stuck one)", func(fs *flag.FlagSet) adminAction {
			most, least := txnIDFlags(fs)
			return func(env *adminEnv, _ []string) (adminReply, error) {
				if err := checkTxnID(*most, *least); err != nil {
					return replyNone(), err
				}
				return replyNone(), env.raw.Post(txnPath("abortTransaction", *most, *least), nil)
			}
		}},
		{"transaction-buffer-stats", []string{"TOPIC"}, "show a topic's transaction buffer (max read position, ongoing and aborted transactions)", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			parts, err := txnTopicParts(args[0])
			if err != nil {
				return replyNone(), err
			}
			var out any
			err = env.raw.Get(txnPath(append([]string{"transactionBufferStats"}, parts...)...), &out)
			return replyObject(out), err
		})},
		{"pending-ack-stats", []string{"TOPIC"}, "show a subscription's acknowledgements held by open transactions", func(fs *flag.FlagSet) adminAction {
			sub := fs.String("subscription", "", "the subscription (required)")
			return func(env *adminEnv, args []string) (adminReply, error) {
				if *sub == "" {
					return replyNone(), usageErrorf("--subscription is required")
				}
				parts, err := txnTopicParts(args[0])
				if err != nil {
					return replyNone(), err
				}
				var out any
				err = env.raw.Get(txnPath(append(append([]string{"pendingAckStats"}, parts...), *sub)...), &out)
				return replyObject(out), err
			}
		}},
	}
}

// scaleCmd is pulsar-admin's transactions scale-transactionCoordinators.
var scaleCmd = adminCmd{"scale-transactionCoordinators", nil, "raise the number of transaction coordinators (it never falls)", func(fs *flag.FlagSet) adminAction {
	n := fs.Int("replicas", 0, "the number of coordinators (required)")
	return func(env *adminEnv, _ []string) (adminReply, error) {
		if *n < 1 {
			return replyNone(), usageErrorf("--replicas is required")
		}
		return replyNone(), env.raw.Post(txnPath("transactionCoordinator", "replicas"), *n)
	}
}}
