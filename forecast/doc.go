// Package forecast predicts job runtimes from the history of completed jobs,
// after Lazarević's thesis "Autonomous Grid Scheduling Using Probabilistic
// Job Runtime Forecasting" (UCL, 2008; see docs/architecture.md, Sources),
// and provides the pieces of its deadline scheduler (LTTR).
//
// # Basics
//
// A Forecaster keeps per-partition histories of completed jobs. A partition
// is a value of a set of attributes known at submission (AttrSet: user,
// group, application, queue, processor band, estimate band, week, weekday,
// hour). Which sets to use is decided by the automated search of the thesis
// (Search, §5.2.1): every attribute set is scored by the mean
// within-partition coefficient of variation of runtime and compared with
// its parent; the result is a fallback chain, finest first, ending at the
// root (all jobs). The search re-runs as the history grows.
//
// Each partition runs five self-parametrising predictors (§5.2.2): windowed
// median and windowed mean with a feedback-controlled window, simple
// exponential smoothing with α swept on the history, AR with its order from
// the PACF, and ARMA (gonum least squares and Cholesky). The predictor with
// the lowest recent error makes the partition's forecast. A job is predicted
// by the finest partition of the chain with enough history; with no history
// at all the user's estimate is used (cold start).
//
// Beyond the thesis's point forecasts, each partition keeps its recent
// relative errors, so that RatioSamples yields a distribution of the ratio
// actual/estimate for a job (an extension, labelled as such).
//
// Evaluate replays a trace in time order and reports the out-of-sample
// MdAPE of the forecast, of the users' estimates and of an unpartitioned
// forecast, per-partition MdAPE quartiles and each predictor's Percent Best.
//
// # Caveats
//
//   - No look-ahead: a Forecaster learns only from Observe, fed completions
//     in time order, and Predict refuses a time earlier than the last
//     completion seen (ErrLookAhead). A completion at t counts at t.
//   - A Forecaster is single-threaded, driven by one event loop.
//   - Time is integer seconds on the trace clock; the time attributes need
//     SearchConfig.Epoch (see EpochFromHeader) to be in local time.
//   - The package imports no other scheduling package (plan, overbook, sim);
//     consumers declare the small interfaces they need.
package forecast
