// Package clock gives the site node one notion of time that can run faster
// than the wall clock.
//
// # Basics
//
// A [Clock] tells the time ([Clock.Now]) and makes timers ([Clock.NewTimer]).
// Three implementations exist:
//
//   - [Real] is the wall clock.
//   - [Scaled] runs virtual time a fixed factor faster than the wall clock,
//     starting at a chosen origin: with factor 60 a virtual hour passes in a
//     wall-clock minute. The node uses it, with the simulated executor, to
//     demonstrate a site on a trace in minutes.
//   - [Manual] only moves when [Manual.Advance] is called; for tests.
//
// All three are safe for use by several goroutines at once.
//
// # Caveats
//
// Durations handed to a Clock are durations of its own (virtual) time: a
// Scaled clock with factor 10 fires NewTimer(10*time.Second) after one
// wall-clock second. The scheduling core never sees a Clock: the node reads
// Now and hands the core an integer time.
package clock
