// Package swf reads job traces in the Standard Workload Format (SWF) of the
// Parallel Workloads Archive and sanitises them for replay in the simulator.
//
// An SWF file has header comment lines starting with ';' ("; MaxProcs: 100")
// followed by one line per job with 18 whitespace-separated numeric fields
// (see Job). Read and ReadFile parse such a file, gzip-compressed or plain,
// into a Trace; malformed job lines are reported as *LineError or, on
// request, skipped and counted. Sanitize then applies the five sanitisation
// rules of the federation study (Papaspyrou 2013, §3.2.3) so that every
// remaining job is a valid rigid job for a site of m_k processors.
//
// The reader is written for speed (no regular expressions, no per-line
// allocation for the common integer fields): the 28,476-job KTH trace
// decompresses and parses in about 16 ms on a 2-core development VM
// (BenchmarkReadKTH), most of it spent in gzip.
package swf
