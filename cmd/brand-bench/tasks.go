package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
)

const tasksSynopsis = "tasks [--small] [flags]"

// tasksBenchmark is the task streams benchmark (bench.RunTasks): a task
// job leased, answered and trained through a gateway in this process by
// generator and trainer goroutines over HTTP, beside the same policy as
// an in-process Python sampler. It starts no brand binary.
func tasksBenchmark() benchmark[bench.TasksConfig, *bench.TasksReport] {
	return benchmark[bench.TasksConfig, *bench.TasksReport]{
		name: "tasks", synopsis: tasksSynopsis, config: bench.DefaultTasksConfig, timeout: 20 * time.Minute,
		small: bench.SmallTasksConfig, smallDoc: "20,000 prompts, 10 steps of 64: a smoke test (flags given explicitly still apply)",
		noGateway: true,
		run:       bench.RunTasks,
		flags: func(fs *flag.FlagSet, cfg *bench.TasksConfig) func() error {
			fs.IntVar(&cfg.Prompts, "prompts", cfg.Prompts, "prompts of the dataset built (P), each a txt member of about 40 bytes")
			fs.IntVar(&cfg.Step, "step", cfg.Step, "prompts a trainer's step (B)")
			fs.IntVar(&cfg.Ahead, "ahead", cfg.Ahead, "steps the generators may run ahead of the trainer")
			fs.StringVar(&cfg.Policy, "policy", cfg.Policy, "the job's policy: uniform, curriculum or importance")
			fs.IntVar(&cfg.Redraws, "redraws", cfg.Redraws, "dynamic sampling: draws again a pass of a prompt whose answers all agree (0: off)")
			fs.IntVar(&cfg.Retire, "retire", cfg.Retire, "a curriculum retires a prompt after this many solves (0: never)")
			fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "the job's seed")
			fs.IntVar(&cfg.Gens, "generators", cfg.Gens, "generator goroutines (G)")
			fs.IntVar(&cfg.Lease, "lease", cfg.Lease, "prompts a generator leases at a time (K)")
			fs.IntVar(&cfg.Answers, "answers", cfg.Answers, "scores an answer (N)")
			fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "steps the trainer reads (S)")
			fs.DurationVar(&cfg.Backoff, "backoff", cfg.Backoff, "a generator's wait after a 503 (the window is full)")
			fs.DurationVar(&cfg.Poll, "poll", cfg.Poll, "the trainer's wait between asks while a step fills")
			fs.StringVar(&cfg.Gateway, "gateway", "", "an external gateway's URL: no dataset is built and no gateway started; its CPU is not this process's")
			fs.StringVar(&cfg.Dataset, "dataset", cfg.Dataset, "the dataset of the task job")
			fs.StringVar(&cfg.Token, "token", "", "bearer token for --gateway")
			fs.BoolVar(&cfg.NoPython, "no-python", false, "skip the Python sampler")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python 3 for python/bench/tasks_sampler.py, standard library only (default: $BRAND_BENCH_PYTHON, /usr/bin/python3, python3)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the dataset's store goes (default: a temporary directory, removed)")
			return nil
		},
	}
}
