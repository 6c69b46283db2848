// Package sim replays workload traces through the same scheduling core the
// node runs (package plan), with a virtual clock, as fast as the CPU allows.
//
// # Basics
//
// Run takes jobs sorted by submit time and a site configuration, and returns
// a Record per job: its admission decision, when it started and ended, and
// whether it was killed at the end of its reservation. ComputeMetrics turns
// records into the figures of the federation digest (AWRT, AWWT, utilisation,
// makespan, squashed area) plus bounded slowdown and wait percentiles.
//
// # Determinism
//
// A replay never reads the wall clock and uses no global randomness. At each
// event time the order is fixed: jobs ending at t, then jobs submitted at t in
// input order, then one scheduling pass; ties between ends break on input
// order. The same input therefore gives byte-identical output.
package sim
