// Package cli is what Brand's two binaries, brand (the gateway and its
// dataset tools) and brand-bench (the benchmark harness), share of a
// command line.
//
// # Why
//
// The harness moved out of the server binary so that the server links
// neither it nor its charting libraries, but the two programs must still
// behave as one tool: a subcommand table dispatched the same way, with the
// same help and exit codes (0 done or help asked, 1 failed, 2 a command
// line that does not parse); flags parsed and reported the same way; and
// an object store opened from the same --s3-* flags and AWS_* variables,
// so that a limit the harness serves reads the store exactly as the gateway
// under test does. Defining these once keeps the programs from drifting
// apart.
//
// # State
//
// The package holds no state of its own: everything a command may touch of
// the outside world comes in an [Env], so tests run commands in-process,
// several at once.
package cli
