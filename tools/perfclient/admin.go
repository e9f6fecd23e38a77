package perfclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// createPartitioned creates each topic with n partitions through the
// admin API at adminURL. A topic that already exists is left as it is,
// so reruns work; its partition count is then whatever it was made with.
func createPartitioned(ctx context.Context, adminURL string, topics []string, n int) error {
	admin, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: adminURL})
	if err != nil {
		return fmt.Errorf("perfclient: admin client for %s: %w", adminURL, err)
	}
	for _, topic := range topics {
		name, err := utils.GetTopicName(topic)
		if err != nil {
			return fmt.Errorf("perfclient: topic %q: %w", topic, err)
		}
		err = admin.Topics().CreateWithContext(ctx, *name, n)
		if err != nil && !alreadyExists(err) {
			return fmt.Errorf("perfclient: create %s with %d partitions at %s: %w", topic, n, adminURL, err)
		}
	}
	return nil
}

// alreadyExists recognises Pulsar's 409 Conflict, or its message where a
// server answers otherwise.
func alreadyExists(err error) bool {
	var re rest.Error
	if errors.As(err, &re) && re.Code == http.StatusConflict {
		return true
	}
	return strings.Contains(strings.ToLower(err.Error()), "already exist")
}
