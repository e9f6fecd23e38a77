package metadata_test

import (
	"testing"

	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/metadatatest"
)

func TestMemoryConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadatatest.Harness {
		srv := metadata.NewMemoryServer()
		return metadatatest.Harness{
			NewSession: func(t *testing.T) metadata.Store {
				s := srv.NewSession()
				t.Cleanup(func() { s.Close() })
				return s
			},
			Expire: func(t *testing.T, s metadata.Store) { srv.ExpireSession(s) },
		}
	})
}
