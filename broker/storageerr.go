package broker

import (
	"errors"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// notEnoughBookies starts the message of a SEND_ERROR for an add no
// bookie could take, in Pulsar's words (BKNotEnoughBookiesException), so
// an operator searching for it finds Pulsar's advice too; the rest says
// which bookies are read-only and why ("out of disk space").
const notEnoughBookies = "Not enough non-faulty bookies available"

// addErrorAnswer is the SEND_ERROR for a failed add. Pulsar answers
// PersistenceError for every storage failure (TopicTerminatedError for a
// terminated topic); clients reconnect on it, which the managed ledger
// paces with its backoff (managedledger/bk_backoff.go).
func addErrorAnswer(err error) (pb.ServerError, string) {
	switch {
	case errors.Is(err, managedledger.ErrTerminated):
		return pb.ServerError_TopicTerminatedError, err.Error()
	case errors.Is(err, ledger.ErrNotEnoughBookies), errors.Is(err, client.ErrReadOnly):
		return pb.ServerError_PersistenceError, notEnoughBookies + ": " + err.Error()
	}
	return pb.ServerError_PersistenceError, err.Error()
}
