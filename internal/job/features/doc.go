// Package features is what a job is made of, in features, and the one table
// of which features go together.
//
// A job is the sum of its features: a source (one dataset, a mixture, a
// schedule), a sampling (uniform, importance), a unit (samples as
// stored, packed token sequences, clips), edits made during the run
// (exclusions, appends), an assignment of a global batch to ranks (plain,
// locality, balance=), a transform, a view of some fields. Each feature
// is one entry of Features; for every pair of them the Table says
// whether they compose, are refused (one error, ErrIncompatible, with the
// cell's message) or make a documented downgrade (the job is served, one
// feature's effect is dropped and the cell says why). What no pair can
// say is a Rule of the same table: three features that do not go
// together though every two of them do (a vision mixture balanced by
// cost), or a feature and a parameter's value (eos= only with
// pack=concat, schedule= only with job=); with the companions (a
// parameter that means nothing without its feature) and the exclusive
// groups (one thing named two ways), these are every refusal of which
// features and parameters go together that the server makes.
//
// # Why one table
//
// Whether two features go together used to be decided where each was
// written: the query parser, a check per edit, the assigner, the
// planner and the Python client each held a copy, and pairs no single
// feature's test looked at broke the first promise (exact data, or a
// clear error): a stored exclusion list silently dropped when its job
// was read as a mixture, /plan refusing a job /epoch served. Here every
// entry point asks one table — the parser (the features a request
// names, and its parameters: CheckParams), the resolver (with the job's
// stored edits and its dataset's kind), every edit endpoint (with the
// edit's own), /plan (with its plan options) — so a pair is answered the
// same everywhere, and adding a feature is one entry here and one cell
// per pair. No refusal of the kind is decided in the parser's code, the
// layout or the planner alone, where neither the table nor the clients
// would see it (the layout's own checks of a vision job stay, a defence
// in depth no request reaches): the planner asks the table too, and
// /plan asks it how a job's global batches go to its ranks
// (Set.Assignment).
//
// The table is published: Golden renders it as the JSON file the Python
// client reads (python/brand/compat.json) instead of a copy of its own,
// and Markdown as the table of docs/http-api.md; tests hold both to it.
//
// # Detection
//
// A request's features are read from its query parameters (Detect), by
// rules that are data too (Feature.SetBy, Feature.DefaultUnless), so the
// Python client detects them as the gateway does. Features only the
// server knows — a stored edit, a dataset served in place, a plan's
// resize — are added by whoever resolves them (Set.With).
//
// Standard library and package api only; no package-level mutable state.
package features
