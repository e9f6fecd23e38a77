package broker

import (
	"context"
	"maps"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
)

// Topic-level permissions (admin.TopicPolicies), as Pulsar stores them:
// in the namespace's policies, auth_policies.destination_auth keyed by
// the topic's full name. The authorizer reads them there (a partition
// counts as its partitioned topic, so a grant on the partitioned topic
// covers its partitions).

// TopicPermissions answers the roles that may act on the topic: the
// namespace's grants with the topic's own over them, as Pulsar's
// getPermissionsOnTopic merges them.
func (b *Broker) TopicPermissions(ctx context.Context, name string) (map[string][]resources.AuthAction, error) {
	t, err := b.policyTopic(name)
	if err != nil {
		return nil, err
	}
	p, err := b.cfg.Resources.GetNamespace(ctx, t.Tenant, t.Namespace)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(p.AuthPolicies.NamespaceAuth)
	if out == nil {
		out = map[string][]resources.AuthAction{}
	}
	maps.Copy(out, p.AuthPolicies.DestinationAuth[t.String()])
	return out, nil
}

// GrantTopicPermission gives role actions on the topic (replacing what it
// had there).
func (b *Broker) GrantTopicPermission(ctx context.Context, name, role string, actions []resources.AuthAction) error {
	t, err := b.policyTopic(name)
	if err != nil {
		return err
	}
	_, err = b.cfg.Resources.UpdateNamespace(ctx, t.Tenant, t.Namespace, func(p *resources.Policies) error {
		if p.AuthPolicies.DestinationAuth == nil {
			p.AuthPolicies.DestinationAuth = map[string]map[string][]resources.AuthAction{}
		}
		grants := p.AuthPolicies.DestinationAuth[t.String()]
		if grants == nil {
			grants = map[string][]resources.AuthAction{}
			p.AuthPolicies.DestinationAuth[t.String()] = grants
		}
		grants[role] = append([]resources.AuthAction{}, actions...)
		return nil
	})
	if err == nil {
		b.log.Info("topic permission granted", "topic", t.String(), "role", role, "actions", actions)
	}
	return err
}

// RevokeTopicPermission removes role's grant on the topic; a role with no
// grant at the topic level is 412, as in Pulsar.
func (b *Broker) RevokeTopicPermission(ctx context.Context, name, role string) error {
	t, err := b.policyTopic(name)
	if err != nil {
		return err
	}
	_, err = b.cfg.Resources.UpdateNamespace(ctx, t.Tenant, t.Namespace, func(p *resources.Policies) error {
		grants := p.AuthPolicies.DestinationAuth[t.String()]
		if _, ok := grants[role]; !ok {
			return admin.Errorf(resources.ErrPrecondition, "Permissions are not set at the topic level for role %s on %s", role, t.String())
		}
		delete(grants, role)
		if len(grants) == 0 {
			delete(p.AuthPolicies.DestinationAuth, t.String())
		}
		return nil
	})
	if err == nil {
		b.log.Info("topic permission revoked", "topic", t.String(), "role", role)
	}
	return err
}
