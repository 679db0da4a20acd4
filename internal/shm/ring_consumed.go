package shm

// Consumed returns the consumer's position: the ticket of the next message it
// will consume (a snapshot for producers). A producer that committed tickets
// t0.. and then reads Consumed() < t0 knows the consumer has older messages
// still to take, so it will reach the new ones without a wake-up: with
// sequentially consistent atomics, its later "ring empty" check cannot miss
// a commit that preceded this load.
func (q *Ring) Consumed() uint64 { return q.head.Load() }

// Sleepers returns the number of sleepers the Bell's owner has announced (a
// snapshot): a ringer that reads 0 after its Commit need not Ring.
func (b Bell) Sleepers() uint32 { return b.sleepers.Load() }
