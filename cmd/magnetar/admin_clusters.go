package main

// magnetar admin clusters: list, get, create, update, delete
// (pulsar-admin clusters). update changes only the URLs given, keeping
// the others as the server has them.

import (
	"flag"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// clusterURLs are the flags of clusters create and update.
type clusterURLs struct {
	fs                                         *flag.FlagSet
	url, urlSecure, brokerURL, brokerURLSecure string
}

func defineClusterURLs(fs *flag.FlagSet) *clusterURLs {
	u := &clusterURLs{fs: fs}
	fs.StringVar(&u.url, "url", "", "service URL (http://host:8080)")
	fs.StringVar(&u.urlSecure, "url-secure", "", "TLS service URL (https://host:8443)")
	fs.StringVar(&u.brokerURL, "broker-url", "", "broker service URL (pulsar://host:6650)")
	fs.StringVar(&u.brokerURLSecure, "broker-url-secure", "", "TLS broker service URL (pulsar+ssl://host:6651)")
	return u
}

// apply sets in d the URLs given on the command line.
func (u *clusterURLs) apply(d *utils.ClusterData) {
	u.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "url":
			d.ServiceURL = u.url
		case "url-secure":
			d.ServiceURLTls = u.urlSecure
		case "broker-url":
			d.BrokerServiceURL = u.brokerURL
		case "broker-url-secure":
			d.BrokerServiceURLTls = u.brokerURLSecure
		}
	})
}

func clusterCmds() []adminCmd {
	return []adminCmd{
		{"list", nil, "list the clusters", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			names, err := env.api.Clusters().List()
			return replyLines(names), err
		})},
		{"get", []string{"CLUSTER"}, "show a cluster's URLs", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			d, err := env.api.Clusters().Get(args[0])
			return replyObject(d), err
		})},
		{"create", []string{"CLUSTER"}, "create a cluster", func(fs *flag.FlagSet) adminAction {
			u := defineClusterURLs(fs)
			return func(env *adminEnv, args []string) (adminReply, error) {
				d := utils.ClusterData{Name: args[0]}
				u.apply(&d)
				return replyNone(), env.api.Clusters().Create(d)
			}
		}},
		{"update", []string{"CLUSTER"}, "change a cluster's URLs (those not given are kept)", func(fs *flag.FlagSet) adminAction {
			u := defineClusterURLs(fs)
			return func(env *adminEnv, args []string) (adminReply, error) {
				d, err := env.api.Clusters().Get(args[0])
				if err != nil {
					return replyNone(), err
				}
				d.Name = args[0]
				u.apply(&d)
				return replyNone(), env.api.Clusters().Update(d)
			}
		}},
		{"delete", []string{"CLUSTER"}, "delete a cluster", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			return replyNone(), env.api.Clusters().Delete(args[0])
		})},
	}
}
