// Package task holds task streams (docs/tasks.md): the sampler of
// post-training, kept by the gateway. A task job leases prompts of a
// dataset to generators, takes their scored answers back, and groups the
// answers that count into the trainer's steps, under a policy (uniform,
// a pass-rate curriculum, importance by score, each with or without
// dynamic sampling).
//
// # Why in the gateway, and why a log
//
// Every RL framework rebuilds this sampler in its own process, and loses
// or repeats prompts when a generator, the trainer or the sampler's
// process dies. Here the sampler's every decision is a pure function of
// the job's seed and an append-only log of the requests it took (Plan),
// kept in the dataset's store as segments each created once (Log): a
// node writes segment i+1 only when it holds segments 1…i, so of nodes
// writing at once one wins and the others apply the winner's segment and
// write after it. Every node of a cluster, and a restarted one, so holds
// the same plan, two nodes never lease one prompt at once, and a replay
// of the log re-derives every lease and every step.
//
// # Layout
//
//   - spec.go: a job's spec, its defaults and bounds.
//   - policy.go: the policies, one entry each (weight, retirement).
//   - plan.go: the state machine (Plan.Apply) and its reports.
//   - record.go: records and segments as stored.
//   - stream.go: one job on one node: its plan, its log, the requests
//     grouped into segments (Stream), and the node's jobs (Book).
//
// # Costs
//
// A lease of k prompts is O(k log n) (a Fenwick tree of the pass's
// weights, in integers, so that sums are exact and the same on every
// node); an answer is O(log n). A plan holds about 40 bytes a prompt, 4 a
// prompt leased and not yet answered, and 24 a counted answer plus 4 a
// score.
package task
