package plan

// Under FCFS, EASY and LIST a job's deadline is hard: it bounds the
// reservation the job starts in. A waiting job that can no longer run its
// estimate before its deadline would otherwise wait for ever and, at the
// head of an FCFS or EASY queue, hold up every job behind it. The core
// drops such a job at the first pass after its window closes and tells the
// driver (DecideExpire); NextWake wakes the driver for that pass and for
// the release of every waiting job, so that nothing waits for an unrelated
// event. (EDF and LTTR have soft deadlines: their jobs never expire.)

// hardQueue reports whether the policy queues jobs without reservations and
// holds them to their deadlines.
func (p Policy) hardQueue() bool { return p == FCFS || p == EASY || p == LIST }

// latestStart is the last time j can start and still run its estimate by
// its deadline: Forever for a job without a deadline.
func latestStart(j *Job) int64 {
	if j.Deadline >= Forever {
		return Forever
	}
	return j.Deadline - j.Estimate
}

// closed reports whether j's window has closed at now: it cannot start at
// or after now (and its release) and end by its deadline.
func closed(j *Job, now int64) bool {
	return max(now, j.Release) > latestStart(j)
}

// noteQueued keeps expireAt a lower bound for a job joining the queue.
func (s *Site) noteQueued(e *entry) {
	if s.cfg.Policy.hardQueue() {
		if ls := latestStart(&e.job); ls < Forever {
			s.expireAt = min(s.expireAt, max(ls, e.job.Release)+1)
		}
	}
}

// noteWake keeps quietFrom an upper bound of the times queueWake can
// return for a job joining the queue (its release, and under a hard queue
// its window's close), so that a queue whose jobs were all released before
// now, without windows, is not scanned at every NextWake.
func (s *Site) noteWake(e *entry) {
	w := e.job.Release
	if ls := latestStart(&e.job); ls < Forever && s.cfg.Policy.hardQueue() {
		w = max(w, ls+1)
	}
	s.quietFrom = max(s.quietFrom, w)
}

// expireQueued drops the waiting jobs whose window has closed at now and
// appends a DecideExpire for each, in queue order. It scans the queue only
// when one may have closed.
func (s *Site) expireQueued(now int64) {
	if now < s.expireAt {
		return
	}
	next := Forever
	k := 0
	for _, e := range s.waiting {
		if closed(&e.job, now) {
			s.out = append(s.out, Decision{Kind: DecideExpire, JobID: e.job.ID})
			continue
		}
		if ls := latestStart(&e.job); ls < Forever {
			next = min(next, ls+1)
		}
		s.waiting[k] = e
		k++
	}
	clear(s.waiting[k:])
	s.waiting = s.waiting[:k]
	s.expireAt = next
}

// queueWake is the earliest time after now at which a waiting job is
// released or, under a policy with hard deadlines, its window closes.
func (s *Site) queueWake(now int64) int64 {
	t := Forever
	if now >= s.quietFrom {
		return t // every job that ever joined the queue is released and, under a hard queue, past its window
	}
	hard := s.cfg.Policy.hardQueue()
	for _, e := range s.waiting {
		if r := e.job.Release; r > now {
			t = min(t, r)
		}
		if hard {
			if ls := latestStart(&e.job); ls < Forever && ls+1 > now {
				t = min(t, ls+1)
			}
		}
	}
	return t
}
