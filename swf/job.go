package swf

// Job is one job line of a Standard Workload Format trace. Times are in
// seconds relative to the trace's UnixStartTime; -1 means unknown, as in the
// format. Decimal fields of the file are rounded to the nearest integer.
type Job struct {
	ID           int64 // field 1
	Submit       int64 // field 2: submit time
	Wait         int64 // field 3
	Runtime      int64 // field 4: actual run time
	AllocProcs   int64 // field 5
	AvgCPU       int64 // field 6
	UsedMem      int64 // field 7
	ReqProcs     int64 // field 8
	ReqTime      int64 // field 9: the user's runtime estimate
	ReqMem       int64 // field 10
	Status       int64 // field 11
	User         int64 // field 12
	Group        int64 // field 13
	Executable   int64 // field 14: application
	Queue        int64 // field 15
	Partition    int64 // field 16
	PrecedingJob int64 // field 17
	ThinkTime    int64 // field 18
	Line         int   // line number in the file, for error messages and provenance
}

// Procs is the number of processors the job occupies: the allocated count,
// falling back to the requested count when the allocation is unknown.
func (j Job) Procs() int64 {
	if j.AllocProcs > 0 {
		return j.AllocProcs
	}
	return j.ReqProcs
}
