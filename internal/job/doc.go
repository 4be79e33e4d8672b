// Package job is the parent of what a request's job is resolved into before
// its batches are laid out, and of what each job's serving cost:
//
//	query      the one table of every query parameter, and its parser
//	catalog    the dataset versions a node serves, reloads, the chunk loader
//	jobsched   the mixture schedules stored under job names
//	feedback   importance sampling's per-job state: feedback, seals, snapshots
//	livestats  what each epoch of each job stream cost, beside the optimum
//	plans      the /plan endpoint's answers, resolved as batches resolve jobs
package job
