package broker

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/golang-jwt/jwt/v5"
)

// TestTopicAndSubscriptionPermissions: grants below the namespace, set
// through pulsaradmin as an operator would (Topics().GrantPermission,
// RevokePermission, GetPermissions; Namespaces().GrantSubPermission,
// RevokeSubPermission, GetSubPermissions), are stored where Pulsar keeps
// them and enforced on the next PRODUCER and SUBSCRIBE.
func TestTopicAndSubscriptionPermissions(t *testing.T) {
	sb := startSecuredBroker(t)
	tok := sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": "admin-t"})
	adm, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: sb.web, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	b := topicName(t, "persistent://t/ns2/b")
	answerAs := func(role, op, arg string) string {
		t.Helper()
		r := sb.connectWithToken(t, sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": role}), false)
		defer r.conn.Close()
		return r.answer(t, op, arg)
	}

	// Topic grants: app may produce on b once granted, and not after.
	if got := answerAs("app", "PRODUCER", "t/ns2/b"); got != "AuthorizationError" {
		t.Fatalf("PRODUCER before the grant: %s", got)
	}
	produce, err := utils.ParseAuthAction("produce")
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().GrantPermission(b, "app", []utils.AuthAction{produce}); err != nil {
		t.Fatal(err)
	}
	perms, err := adm.Topics().GetPermissions(b)
	if err != nil || !slices.Equal(perms["app"], []utils.AuthAction{produce}) {
		t.Fatalf("topic permissions %v %v", perms, err)
	}
	if got := answerAs("app", "PRODUCER", "t/ns2/b"); got != "ok" {
		t.Fatalf("PRODUCER after the grant: %s", got)
	}
	if got := answerAs("app", "PRODUCER", "t/ns2/a"); got != "AuthorizationError" {
		t.Fatalf("PRODUCER on another topic: %s", got)
	}
	if got := answerAs("app", "SUBSCRIBE", "t/ns2/b"); got != "AuthorizationError" {
		t.Fatalf("SUBSCRIBE with produce granted: %s", got)
	}
	if err := adm.Topics().RevokePermission(b, "app"); err != nil {
		t.Fatal(err)
	}
	if got := answerAs("app", "PRODUCER", "t/ns2/b"); got != "AuthorizationError" {
		t.Fatalf("PRODUCER after the revoke: %s", got)
	}
	var re rest.Error
	if err := adm.Topics().RevokePermission(b, "app"); !errors.As(err, &re) || re.Code != http.StatusPreconditionFailed {
		t.Fatalf("revoking a grant the topic does not have: %v, want 412", err)
	}
	// The namespace's grants show on the topic too.
	if perms, err := adm.Topics().GetPermissions(topicName(t, "persistent://t/ns/x")); err != nil || len(perms["producer"]) != 1 {
		t.Fatalf("t/ns/x permissions %v %v, want the namespace's producer grant", perms, err)
	}

	// Subscription permissions: once a subscription lists roles, only
	// they (and admins) may consume it.
	ns, _ := utils.GetNamespaceName("t/ns")
	if got := answerAs("consumer", "SUBSCRIBE", "t/ns/a#orders"); got != "ok" {
		t.Fatalf("SUBSCRIBE to an open subscription: %s", got)
	}
	if err := adm.Namespaces().GrantSubPermission(*ns, "orders", []string{"app"}); err != nil {
		t.Fatal(err)
	}
	subs, err := adm.Namespaces().GetSubPermissions(*ns)
	if err != nil || !slices.Equal(subs["orders"], []string{"app"}) {
		t.Fatalf("subscription permissions %v %v", subs, err)
	}
	deadline := time.Now().Add(10 * time.Second) // namespace policies reach the authorizer through a watched cache
	for answerAs("consumer", "SUBSCRIBE", "t/ns/a#orders") != "AuthorizationError" {
		if time.Now().After(deadline) {
			t.Fatal("consumer still subscribes to orders after it was given to app alone")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := adm.Namespaces().RevokeSubPermission(*ns, "orders", "app"); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().RevokeSubPermission(*ns, "orders", "app"); !errors.As(err, &re) || re.Code != http.StatusPreconditionFailed {
		t.Fatalf("revoking a role the subscription does not list: %v, want 412", err)
	}
	for answerAs("consumer", "SUBSCRIBE", "t/ns/a#orders") != "ok" {
		if time.Now().After(deadline) {
			t.Fatal("consumer cannot subscribe to orders after its last role was revoked")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
