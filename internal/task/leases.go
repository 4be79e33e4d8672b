package task

// LeaseBook is a plan's leases: each one's time and how it ended, and the
// open ones, in the order made (which is their deadlines' order: one TTL,
// times that never go back).
type LeaseBook struct {
	ttl    uint64
	status []uint8  // by lease number − 1
	made   []uint64 // each lease's time
	open   map[uint64]*openLease
	openQ  []uint64
	ohead  int
	leased int // prompts in open leases, not answered
	// byReq is each open lease made with a request ID, by its generator
	// and ID: an ask again finds it at once, however many leases are
	// open (both clients send an ID with every ask).
	byReq map[leaseReq]uint64
}

// leaseReq is a lease's generator and request ID.
type leaseReq struct{ gen, req string }

func newLeaseBook(ttl uint64) LeaseBook {
	return LeaseBook{ttl: ttl, open: map[uint64]*openLease{}, byReq: map[leaseReq]uint64{}}
}

// Made is the number of leases made; the next is numbered Made()+1.
func (b *LeaseBook) Made() uint64 { return uint64(len(b.status)) }

// Deadline is when lease id expires (ms since the job was made).
func (b *LeaseBook) Deadline(id uint64) uint64 { return b.made[id-1] + b.ttl }

// Leased is the number of prompts in open leases not yet answered.
func (b *LeaseBook) Leased() int { return b.leased }

// OpenCount is the number of open leases.
func (b *LeaseBook) OpenCount() int { return len(b.open) }

// add opens lease l, made at t, as the next number.
func (b *LeaseBook) add(l *openLease, t uint64) uint64 {
	b.status = append(b.status, leaseOpen)
	b.made = append(b.made, t)
	id := uint64(len(b.status))
	b.leased += len(l.prompts)
	b.open[id] = l
	b.openQ = append(b.openQ, id)
	if l.req != "" {
		b.byReq[leaseReq{l.gen, l.req}] = id
	}
	return id
}

// closed forgets open lease id, l, ended with status.
func (b *LeaseBook) closed(id uint64, l *openLease, status uint8) {
	delete(b.open, id)
	if l.req != "" && b.byReq[leaseReq{l.gen, l.req}] == id {
		delete(b.byReq, leaseReq{l.gen, l.req})
	}
	b.status[id-1] = status
}

// answered marks one prompt of lease id answered, closing the lease when
// it was its last.
func (b *LeaseBook) answered(id uint64, l *openLease, i int) {
	l.done[i] = true
	l.left--
	b.leased--
	if l.left == 0 {
		b.closed(id, l, leaseAnswered)
	}
}

// expire ends the leases whose deadline is at or before clock, handing
// each unanswered prompt to back, in the order of the leases and of each
// one's prompts.
func (b *LeaseBook) expire(clock uint64, back func(q uint32)) {
	for b.ohead < len(b.openQ) {
		id := b.openQ[b.ohead]
		l := b.open[id]
		if l == nil {
			b.ohead++
			continue
		}
		if l.t+b.ttl > clock {
			break
		}
		for i, q := range l.prompts {
			if !l.done[i] {
				b.leased--
				back(q)
			}
		}
		b.closed(id, l, leaseExpired)
		b.ohead++
	}
	if b.ohead > 1024 && b.ohead*2 > len(b.openQ) {
		b.openQ = append(b.openQ[:0], b.openQ[b.ohead:]...)
		b.ohead = 0
	}
}

// Open is an open lease's prompts not yet answered, with their passes,
// and false for a lease that is not open.
func (b *LeaseBook) Open(id uint64) (Lease, bool) {
	l := b.open[id]
	if l == nil {
		return Lease{}, false
	}
	out := Lease{ID: id, Gen: l.gen, Req: l.req, Step: l.step, T: l.t}
	for i, q := range l.prompts {
		if !l.done[i] {
			out.Prompts = append(out.Prompts, q)
			out.Passes = append(out.Passes, l.passes[i])
		}
	}
	return out, true
}

// OpenOf is generator gen's open leases, first made first.
func (b *LeaseBook) OpenOf(gen string, t uint64) []Lease {
	var out []Lease
	for _, id := range b.openQ[b.ohead:] {
		if l := b.open[id]; l != nil && l.gen == gen && l.t+b.ttl > t {
			o, _ := b.Open(id)
			out = append(out, o)
		}
	}
	return out
}

// Overdue is what of the open leases is past its deadline at t: the
// leases, and their prompts not answered. The plan expires them at its
// next record (a request of the job, at its time), which hands those
// prompts back; until then they are open in the log, held by no one, and
// no answer to them is taken.
func (b *LeaseBook) Overdue(t uint64) (leases, prompts int) {
	for _, id := range b.openQ[b.ohead:] {
		l := b.open[id]
		if l == nil {
			continue
		}
		if l.t+b.ttl > t {
			break
		}
		leases++
		prompts += l.left
	}
	return leases, prompts
}

// ByRequest is generator gen's open lease that request req made ("" is
// none): a lease asked again is answered with it.
func (b *LeaseBook) ByRequest(gen, req string) (Lease, bool) {
	if req == "" {
		return Lease{}, false
	}
	id, ok := b.byReq[leaseReq{gen, req}]
	if !ok {
		return Lease{}, false
	}
	return b.Open(id)
}

// Holds reports whether open lease id holds prompt q, and whether the
// lease is open at all.
func (b *LeaseBook) Holds(id uint64, q uint32) (holds, open bool) {
	l := b.open[id]
	if l == nil {
		return false, false
	}
	for _, x := range l.prompts {
		if x == q {
			return true, true
		}
	}
	return false, true
}

// ExpiresBy reports whether a record at t would expire a lease.
func (b *LeaseBook) ExpiresBy(t uint64) bool {
	for _, id := range b.openQ[b.ohead:] {
		if l := b.open[id]; l != nil {
			return l.t+b.ttl <= t
		}
	}
	return false
}
