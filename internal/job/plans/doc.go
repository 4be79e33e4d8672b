// Package plans answers the /plan endpoint's requests: it resolves what a
// plan's job reads — the dataset version it pins or the cluster agrees
// on, the view of the fields it names, a mixture's components, a stored
// schedule's version, the importance snapshot its epochs are drawn from,
// a transform pipeline's costs on this node — into the planner's input
// (api.PlanDataset, api.Job, api.PlanOptions), and runs the plan in one of
// a few slots.
//
// # Why
//
// A plan is a simulation of what the gateway will do, so it must read the
// data a job's batches read, as they read it: the same version, the same
// view, the same defaults and limits (package query's one table). The
// resolution that makes this so sat among the gateway's HTTP handlers;
// here it is a value of its own with small interfaces for what it needs of
// the gateway's jobs stage, so that it is tested without a gateway and the
// gateway keeps only the route and the mapping of errors to statuses.
//
// The package speaks only in types of the packages below the gateway: the
// Planner is passed in (`brand serve` passes planner.ForGateway), so the
// server's request path does not link the simulator.
//
// # Costs
//
// A plan costs up to seconds of a core, within the planner's budget:
// Slots plans run at once, so that one long plan does not hold every other
// back, and a plan waits at most Wait for a slot before it is refused
// (ErrBusy, 503).
//
// # Errors
//
// Every error is one the gateway maps to a status in one place
// (internal/server/httperr): a request that does not parse or that the planner
// cannot plan wraps query.ErrBadRequest; a gateway built without a planner
// answers httperr.ErrNotImplemented; ctx's errors and api.ErrPlanBudget
// are returned as they are.
//
// # Concurrency
//
// A Maker's methods may be called concurrently.
package plans
