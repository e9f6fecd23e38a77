package managedledger

// ackState is a cursor's acknowledgement state in global entry indices
// (the stream's entries numbered from 0 across ledgers): markDelete
// (everything at or before it is acknowledged), read (the next entry to
// read), and acked, the individually acknowledged indices after
// markDelete as sorted, disjoint, non-adjacent [lo, hi] ranges, and
// batch, the partly acknowledged batch entries (batchack.go). Both
// implementations share it; their ledger's lock guards it.
//
// Invariant: every batch set is of an index after markDelete that is not
// in acked, so the methods that acknowledge an index (addAcked,
// addAckedRange, normalise, clear, resetTo) drop its set.
type ackState struct {
	markDelete int64
	read       int64
	acked      []indexRange
	// props are the cursor's properties (properties.go).
	props map[string]int64
	batch []batchSet // sorted by index
}

type indexRange struct{ lo, hi int64 }

// addAcked inserts index i into the acked ranges, merging neighbours.
func (s *ackState) addAcked(i int64) {
	s.dropBatch(i, i)
	k := 0
	for k < len(s.acked) && s.acked[k].hi < i-1 {
		k++
	}
	switch {
	case k == len(s.acked) || s.acked[k].lo > i+1:
		s.acked = append(s.acked, indexRange{})
		copy(s.acked[k+1:], s.acked[k:])
		s.acked[k] = indexRange{i, i}
	default:
		s.acked[k].lo, s.acked[k].hi = min(s.acked[k].lo, i), max(s.acked[k].hi, i)
		if k+1 < len(s.acked) && s.acked[k+1].lo <= s.acked[k].hi+1 {
			s.acked[k].hi = max(s.acked[k].hi, s.acked[k+1].hi)
			s.acked = append(s.acked[:k+1], s.acked[k+2:]...)
		}
	}
}

// addAckedRange inserts [lo, hi] into the acked ranges, merging
// neighbours (appending is the fast path: snapshots list ranges in order).
func (s *ackState) addAckedRange(lo, hi int64) {
	if lo > hi {
		return
	}
	s.dropBatch(lo, hi)
	if n := len(s.acked); n == 0 || s.acked[n-1].hi < lo-1 {
		s.acked = append(s.acked, indexRange{lo, hi})
		return
	}
	k := 0
	for k < len(s.acked) && s.acked[k].hi < lo-1 {
		k++
	}
	j := k
	for j < len(s.acked) && s.acked[j].lo <= hi+1 {
		lo, hi = min(lo, s.acked[j].lo), max(hi, s.acked[j].hi)
		j++
	}
	s.acked = append(s.acked[:k], append([]indexRange{{lo, hi}}, s.acked[j:]...)...)
}

// normalise folds acked ranges that touch the mark-delete position into
// it and drops those it covers.
func (s *ackState) normalise() {
	for len(s.acked) > 0 && s.acked[0].lo <= s.markDelete+1 {
		s.markDelete = max(s.markDelete, s.acked[0].hi)
		s.acked = s.acked[1:]
	}
	s.dropBatchThrough(s.markDelete)
}

func (s *ackState) isAcked(i int64) bool {
	if i <= s.markDelete {
		return true
	}
	for _, r := range s.acked {
		if i < r.lo {
			return false
		}
		if i <= r.hi {
			return true
		}
	}
	return false
}

// backlog counts unacknowledged indices in [base, end).
func (s *ackState) backlog(base, end int64) int64 {
	n := end - max(s.markDelete+1, base)
	for _, r := range s.acked {
		// Ranges may lie below base: trimming moves a reader's mark-delete
		// position, not its acked ranges.
		if lo, hi := max(r.lo, base), min(r.hi, end-1); lo <= hi {
			n -= hi - lo + 1
		}
	}
	return max(n, 0)
}

// skip acknowledges the next n unacknowledged indices in [base, end),
// walking the gaps between acked ranges (so a large n costs ranges, not
// entries). It returns how many it acknowledged.
func (s *ackState) skip(n, base, end int64) int64 {
	done := int64(0)
	i := max(s.markDelete+1, base)
	for done < n && i < end {
		gapEnd := end - 1
		for _, r := range s.acked {
			if r.hi < i {
				continue
			}
			if r.lo <= i {
				i = r.hi + 1 // inside an acked range: jump past it
				gapEnd = -1
				break
			}
			gapEnd = min(gapEnd, r.lo-1)
			break
		}
		if gapEnd < i {
			continue
		}
		take := min(n-done, gapEnd-i+1)
		s.addAckedRange(i, i+take-1)
		done += take
		i += take
	}
	s.normalise()
	s.read = max(s.read, s.markDelete+1)
	return done
}

// clear acknowledges everything before end.
func (s *ackState) clear(end int64) {
	s.markDelete = max(s.markDelete, end-1)
	s.acked, s.batch = nil, nil
	s.read = max(s.read, s.markDelete+1)
}

// resetTo makes index i the next read, with everything before it
// acknowledged and nothing after it (Reset).
func (s *ackState) resetTo(i int64) {
	s.markDelete, s.read, s.acked, s.batch = i-1, i, nil, nil
}
