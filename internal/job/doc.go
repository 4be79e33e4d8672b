// Package job is the parent of what a request's job is resolved into before
// its batches are laid out, and of what each job's serving cost:
//
//	query      the one table of every query parameter, and its parser
//	catalog    the dataset versions a node serves, reloads, the chunk loader
//	jobstream  a job's stream of epochs, an epoch's order, a component's pace:
//	           what the layout computes and the use table follows
//	edits      what the edits of named jobs share: stored chains, served positions, refusals
//	jobsched   the mixture schedules stored under job names
//	exclusions the exclusion lists stored under job names
//	appends    the append records stored under job names
//	feedback   importance sampling's per-job state: feedback, seals, snapshots
//	livestats  what each epoch of each job stream cost, beside the optimum
//	plans      the /plan endpoint's answers, resolved as batches resolve jobs
package job
