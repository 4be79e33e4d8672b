// Package feedback is a gateway's importance-sampling state
// (docs/importance.md): the per-sample losses trainers report for the
// epochs being trained, the sealing of an epoch's feedback into an
// immutable snapshot in the dataset's store, and the snapshots requests
// name, read from the store once each.
//
// It keeps no state a replica could lose that training needs: feedback
// accumulates in memory until the job seals an epoch, and the sealed
// snapshot is an immutable object in the dataset's store, named by the
// hash of its bytes. Any replica, a restarted one included, computes an
// importance epoch from the version a request names, reading the snapshot
// from the store when it does not hold it. A lost feedback request, or a
// node lost before the seal, loses importance data, never training data.
//
// # Bounds
//
// Everything a client can make it hold or write is bounded (Limits, and
// docs/importance.md "Feedback in a gateway"): jobs holding feedback
// (slots kept while a job is active, never taken from an active job),
// open epochs per job, records per body and bodies decoded at once (8
// bytes a record, read as the body arrives), seals at once, and what the
// store keeps (a job's last sealed epochs). An epoch is sealed once: seals
// on a node run one at a time, and across nodes the epoch's pointer is
// created only if absent, so every seal answers the first one's version.
//
// # Concurrency
//
// A State is safe for concurrent use. An epoch's feedback is applied under
// a shared lock that closing it for a seal takes exclusively, and a seal
// that collected a node's part — whether it held feedback or none yet —
// keeps the epoch closed there until it says how it ended (seal.go): a
// batch answered as accepted is in the seal, and one after is refused. An
// epoch opened afresh applies nothing before its first look at the
// store's pointer.
package feedback
