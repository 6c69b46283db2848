package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// outputChunk is the most a JobOutputChunk carries.
const outputChunk = 64 << 10

// outputPoll is how often a followed output is checked for more bytes.
const outputPoll = 250 * time.Millisecond

// GetJobOutput implements the SiteService call: the output of a job that
// runs here, or, for a delegated one, the peer's answer relayed.
func (s *service) GetJobOutput(req *fedschedv1.GetJobOutputRequest, stream fedschedv1.SiteService_GetJobOutputServer) error {
	ctx := stream.Context()
	j, err := s.get(ctx, req.GetJobId())
	if err != nil {
		return err
	}
	if req.GetOffsetBytes() < 0 {
		return ToStatus(fmt.Errorf("offset must be >= 0, got %d: %w", req.GetOffsetBytes(), ErrInvalidRequest))
	}
	if site := j.GetSite(); site != "" && site != s.n.cfg.Site {
		return s.n.relayOutput(ctx, j, req, stream.Send)
	}
	uid, err := s.n.userIDOf(ctx, j)
	if err != nil {
		return err
	}
	return s.n.streamOutput(ctx, j, uid, req.GetStderr(), req.GetFollow(), req.GetOffsetBytes(), stream.Send)
}

// PeerJobOutput implements the FederationService call: the output of a job
// this site runs for the calling origin.
func (s *fedService) PeerJobOutput(req *fedschedv1.PeerJobOutputRequest, stream fedschedv1.FederationService_PeerJobOutputServer) error {
	if err := s.ready(); err != nil {
		return err
	}
	ctx := stream.Context()
	if req.GetOffsetBytes() < 0 {
		return ToStatus(fmt.Errorf("offset must be >= 0, got %d: %w", req.GetOffsetBytes(), ErrInvalidRequest))
	}
	o := &getAgreementOp{req: &fedschedv1.GetAgreementRequest{OriginSite: req.GetOriginSite(), OriginJobId: req.GetOriginJobId()}, reply: make(chan agreeResult, 1)}
	r, err := s.roundTrip(ctx, o, o.reply)
	if err != nil {
		return err
	}
	id := r.a.GetPeerJobId()
	if id == "" {
		return ToStatus(fmt.Errorf("job %s of %s was not agreed here: %w", req.GetOriginJobId(), req.GetOriginSite(), ErrJobNotFound))
	}
	rec, err := s.n.deps.Store.GetJob(ctx, id)
	if err != nil {
		return ToStatus(fmt.Errorf("job %s (for %s of %s): %w: %w", id, req.GetOriginJobId(), req.GetOriginSite(), ErrJobNotFound, err))
	}
	return s.n.streamOutput(ctx, rec.Job, req.GetOriginJobId(), req.GetStderr(), req.GetFollow(), req.GetOffsetBytes(), stream.Send)
}

// relayOutput asks the peer that runs a delegated job for its output.
func (n *Node) relayOutput(ctx context.Context, j *fedschedv1.Job, req *fedschedv1.GetJobOutputRequest, send func(*fedschedv1.JobOutputChunk) error) error {
	if !n.federating() {
		return ToStatus(fmt.Errorf("job %s runs at %s, but this site is no longer federated: %w", j.GetId(), j.GetSite(), ErrUnavailable))
	}
	addr := n.addrOf(j.GetSite())
	if addr == "" {
		return ToStatus(fmt.Errorf("job %s runs at %s, which is not reachable now: %w", j.GetId(), j.GetSite(), ErrUnavailable))
	}
	cl, err := n.client(ctx, j.GetSite(), addr)
	if err != nil {
		return ToStatus(fmt.Errorf("dial %s: %w: %w", j.GetSite(), ErrUnavailable, err))
	}
	st, err := cl.PeerJobOutput(ctx, &fedschedv1.PeerJobOutputRequest{OriginSite: n.cfg.Site, OriginJobId: j.GetId(),
		Follow: req.GetFollow(), Stderr: req.GetStderr(), OffsetBytes: req.GetOffsetBytes()})
	if err != nil {
		return err
	}
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// The peer's status (NOT_FOUND, FAILED_PRECONDITION, ...) as it
			// is: it names the peer's job.
			return err
		}
		if err := send(c); err != nil {
			return err
		}
	}
}

// streamOutput sends a local job's output from offset; with follow, until
// the job has ended and everything it wrote is sent.
func (n *Node) streamOutput(ctx context.Context, j *fedschedv1.Job, userID string, stderr, follow bool, offset int64, send func(*fedschedv1.JobOutputChunk) error) error {
	if n.cfg.Executor == config.ExecutorSimulated {
		return ToStatus(fmt.Errorf("job %s ran on the simulated executor, which produces no output: %w", j.GetId(), ErrNoOutput))
	}
	path := n.outputFile(j, userID, stderr)
	buf := make([]byte, outputChunk)
	for {
		ended := over(j)
		f, err := os.Open(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && (!follow || ended):
			what := "it has not started"
			if j.GetStartTime() != nil {
				what = "the file is gone"
			}
			return ToStatus(fmt.Errorf("job %s has no output at %s (%s): %w", j.GetId(), path, what, ErrNoOutput))
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return ToStatus(fmt.Errorf("job %s: read output: %w: %w", j.GetId(), ErrNoOutput, err))
		case err == nil:
			for {
				k, rerr := f.ReadAt(buf, offset)
				if k > 0 {
					if err := send(&fedschedv1.JobOutputChunk{Data: buf[:k:k], OffsetBytes: offset}); err != nil {
						f.Close()
						return err
					}
					offset += int64(k)
				}
				if rerr != nil {
					break
				}
			}
			f.Close()
		}
		// Everything written so far is sent. A job seen ended before that
		// read has no more to write.
		if !follow || ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(outputPoll):
		}
		rec, err := n.deps.Store.GetJob(ctx, j.GetId())
		if err != nil {
			return ToStatus(fmt.Errorf("job %s: %w: %w", j.GetId(), ErrUnavailable, err))
		}
		j = rec.Job
	}
}

// outputFile is where a job's output (or error) is on this host.
func (n *Node) outputFile(j *fedschedv1.Job, userID string, stderr bool) string {
	jobDir := n.jobDir(j.GetId())
	out, errPath := outputPaths(j.GetSpec(), userID, jobDir)
	out, errPath = executor.OutputPaths(jobDir, executor.Spec{Stdout: out, Stderr: errPath})
	if stderr {
		return errPath
	}
	return out
}

// over reports whether a job will write no more output: it reached a
// terminal state (a cancelled job once its end is recorded, or if it never
// started).
func over(j *fedschedv1.Job) bool {
	switch j.GetState() {
	case fedschedv1.JobState_JOB_STATE_COMPLETED, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.JobState_JOB_STATE_KILLED,
		fedschedv1.JobState_JOB_STATE_REJECTED:
		return true
	case fedschedv1.JobState_JOB_STATE_CANCELLED:
		return j.GetStartTime() == nil || j.GetEndTime() != nil
	}
	return false
}

// userIDOp asks the loop for the id a job's user was given (the origin's,
// for a job run for a peer).
type userIDOp struct {
	j     *fedschedv1.Job
	reply chan string
}

func (o *userIDOp) run(n *Node, _ int64) func(error) {
	id := n.userJobID(&liveJob{j: o.j})
	return func(error) { o.reply <- id }
}

func (n *Node) userIDOf(ctx context.Context, j *fedschedv1.Job) (string, error) {
	if o := j.GetOriginSite(); o == "" || o == n.cfg.Site {
		return j.GetId(), nil
	}
	op := &userIDOp{j: j, reply: make(chan string, 1)}
	if err := n.send(ctx, op); err != nil {
		return "", ToStatus(err)
	}
	id, err := await(ctx, n, op.reply)
	return id, ToStatus(err)
}
