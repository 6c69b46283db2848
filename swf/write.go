package swf

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Write writes jobs as a Standard Workload Format file: each header line
// as a "; " comment, then one line of the 18 fields per job. Read reads it
// back to the same jobs (Line aside).
func Write(w io.Writer, header []string, jobs []Job) error {
	bw := bufio.NewWriter(w)
	for _, h := range header {
		if strings.ContainsAny(h, "\r\n") {
			return fmt.Errorf("swf: write: header line %q spans lines", h)
		}
		fmt.Fprintf(bw, "; %s\n", h)
	}
	for _, j := range jobs {
		fmt.Fprintf(bw, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d\n", j.ID, j.Submit, j.Wait, j.Runtime, j.AllocProcs,
			j.AvgCPU, j.UsedMem, j.ReqProcs, j.ReqTime, j.ReqMem, j.Status, j.User, j.Group, j.Executable, j.Queue, j.Partition,
			j.PrecedingJob, j.ThinkTime)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("swf: write: %w", err)
	}
	return nil
}
