package main

// magnetar admin tenants: list, get, create, update, delete
// (pulsar-admin tenants). create without --allowed-clusters allows every
// cluster, as pulsar-admin does; update changes only what is given.

import (
	"flag"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// tenantFlags are the flags of tenants create and update.
type tenantFlags struct {
	fs                          *flag.FlagSet
	adminRoles, allowedClusters string
}

func defineTenantFlags(fs *flag.FlagSet) *tenantFlags {
	t := &tenantFlags{fs: fs}
	fs.StringVar(&t.adminRoles, "admin-roles", "", "comma-separated admin roles")
	fs.StringVar(&t.allowedClusters, "allowed-clusters", "", "comma-separated clusters the tenant may use")
	return t
}

func (t *tenantFlags) set(name string) bool { return flagGiven(t.fs, name) }

// apply sets in d what was given on the command line.
func (t *tenantFlags) apply(d *utils.TenantData) {
	if t.set("admin-roles") {
		d.AdminRoles = nonNil(splitList(t.adminRoles))
	}
	if t.set("allowed-clusters") {
		d.AllowedClusters = nonNil(splitList(t.allowedClusters))
	}
}

// nonNil makes a missing list an empty one, so it encodes as [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func tenantCmds() []adminCmd {
	return []adminCmd{
		{"list", nil, "list the tenants", noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
			names, err := env.api.Tenants().List()
			return replyLines(names), err
		})},
		{"get", []string{"TENANT"}, "show a tenant's admin roles and allowed clusters", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			d, err := env.api.Tenants().Get(args[0])
			return replyObject(d), err
		})},
		{"create", []string{"TENANT"}, "create a tenant (allowed clusters default to all clusters)", func(fs *flag.FlagSet) adminAction {
			t := defineTenantFlags(fs)
			return func(env *adminEnv, args []string) (adminReply, error) {
				d := utils.TenantData{Name: args[0], AdminRoles: []string{}, AllowedClusters: []string{}}
				t.apply(&d)
				if !t.set("allowed-clusters") {
					all, err := env.api.Clusters().List()
					if err != nil {
						return replyNone(), err
					}
					d.AllowedClusters = nonNil(all)
				}
				return replyNone(), env.api.Tenants().Create(d)
			}
		}},
		{"update", []string{"TENANT"}, "change a tenant's admin roles or allowed clusters (those not given are kept)", func(fs *flag.FlagSet) adminAction {
			t := defineTenantFlags(fs)
			return func(env *adminEnv, args []string) (adminReply, error) {
				d, err := env.api.Tenants().Get(args[0])
				if err != nil {
					return replyNone(), err
				}
				d.Name = args[0]
				d.AdminRoles, d.AllowedClusters = nonNil(d.AdminRoles), nonNil(d.AllowedClusters)
				t.apply(&d)
				return replyNone(), env.api.Tenants().Update(d)
			}
		}},
		{"delete", []string{"TENANT"}, "delete a tenant (it must have no namespaces)", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			return replyNone(), env.api.Tenants().Delete(args[0])
		})},
	}
}
