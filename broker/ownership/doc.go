// Package ownership decides which broker serves which topics, as Pulsar's
// namespace service and modular load manager do.
//
// A namespace is split into bundles: ranges of the 32-bit hash of topic
// names (CRC-32/IEEE of the full name, as Pulsar), by boundaries stored in
// the namespace policies (default 4 even bundles). A topic is served by the
// broker that owns its bundle. Nothing else is shared between brokers: the
// topic's data lives in bookies, so any broker can take a bundle over.
//
// Metadata (cluster store), Pulsar's paths and JSON shapes:
//
//	/loadbalance/brokers/<host:webPort>  ephemeral: BrokerData (URLs and the latest load report)
//	/loadbalance/leader                  ephemeral: LeaderInfo {"serviceUrl": "http://..."}
//	/namespace/<tenant>/<ns>/<bundle>    ephemeral: OwnerData {"nativeUrl", "httpUrl", "disabled"}
//
// where <bundle> is "0x<lower>_0x<upper>" in 8 hex digits.
//
// Lookup of a topic whose bundle is unowned (Lookup):
//
//   - the leader broker picks the least loaded broker (LeastLoaded); if that
//     is itself it takes the bundle (an ephemeral create: exactly one broker
//     wins), otherwise it redirects the client there with authoritative set;
//   - a broker asked authoritatively takes the bundle itself;
//   - any other broker redirects the client to the leader.
//
// Ownership ends when the owner unloads the bundle (admin unload, load
// shedding, split), when its node is deleted by someone else, or when its
// metadata session is lost: the broker then stops serving those topics at
// once (OnBundleLost, OnSessionLost); if it lags, ledger fencing still
// keeps the new owner's writes safe.
//
// The leader also sheds load (moves bundles off brokers whose message rate
// is far above the least loaded one's) and asks owners to split bundles
// that carry too many topics or too much traffic; see loadmanager.go.
//
// Lock rules: Service.mu guards owned, leader state and pending
// assignments; it is never held across a metadata call.
package ownership
