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
// # Deadlines and forecasts
//
// WithDeadlines gives jobs deadlines from a DeadlineModel (the forecasting
// digest's uniform and modal models), from a seeded generator.
// Config.SoftDeadlines makes them targets: the deadline policies (EDF,
// LTTR) order by them and every other policy runs best-effort, and
// ComputeDeadlineMetrics measures them. A Config.Predictor forecasts each
// job's runtime at its submission for LTTR. It is told of every completion
// as it happens, so it sees only the past. OnlineForecast wraps a
// forecast.Forecaster this way, and also serves the SLA experiments as
// per-job overbooking statistics (SLAConfig.StatsSource).
//
// # Determinism
//
// A replay never reads the wall clock and uses no global randomness. At each
// event time the order is fixed: jobs ending at t, then jobs submitted at t in
// input order, then one scheduling pass; ties between ends break on input
// order. The same input therefore gives byte-identical output.
package sim
