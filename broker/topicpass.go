package broker

import (
	"iter"
	"runtime"
)

// passChunk is how many topics a background pass handles between two
// yields of the processor: a few microseconds each, so a chunk is a few
// hundred microseconds.
const passChunk = 64

// topicPass is the loaded topics for a background pass over all of them
// (rates, dispatch limits, replication, reports, metrics), yielding the
// processor every passChunk topics (yielding). The topics are a snapshot,
// as loadedTopics; the caller must hold no lock across the loop.
func (b *Broker) topicPass() iter.Seq[*topic] {
	return yielding(b.loadedTopics(), passChunk)
}

// yielding ranges over items and gives up the processor (runtime.Gosched)
// after every chunk of them. A pass over 10,000 topics is 15-25 ms of CPU,
// and run whole it held a P that long: with the broker on one core
// (GOMAXPROCS=1) every receipt of that moment waited behind it, and the
// broker's once-a-second passes were the longest runs on the processor
// under a 10,000-topic load (TUNING.md). Yielding lets the goroutines
// readied meanwhile (deliveries, event loops) run between chunks instead.
func yielding[T any](items []T, chunk int) iter.Seq[T] {
	return func(yield func(T) bool) {
		for i, it := range items {
			if i > 0 && i%chunk == 0 {
				runtime.Gosched()
			}
			if !yield(it) {
				return
			}
		}
	}
}
