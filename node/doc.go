// Package node is the site node: the driver that runs one site's scheduling
// core against the wall clock, serves the gRPC API, keeps state in a store
// and starts jobs through an executor.
//
// # Basics
//
// The event loop (to come) is the only writer of the core's state; gRPC
// handlers, the executor and timers send it messages. Its parts live in
// subpackages, each usable and tested on its own:
//
//   - node/config: the YAML configuration, environment and flags.
//   - node/store: durable state (bbolt) and an in-memory twin.
//   - node/executor: starting, killing and re-attaching to jobs.
//   - node/clock: wall, scaled and manual clocks.
//
// This package holds what the gRPC boundary needs: the node's sentinel
// errors (errors.go) and the one table that maps them to gRPC status codes
// and back ([ToStatus], [FromStatus]); and [SpecHash], the body hash of
// idempotent submissions. README.md says how the parts fit together.
//
// # Caveats
//
// Errors cross the wire as a status code plus a google.rpc.ErrorInfo whose
// reason names the sentinel; clients recover the sentinel with FromStatus
// and test it with errors.Is. Nothing ever matches on message text.
package node
