#!/usr/bin/env bash
# soak.sh runs the cluster's tests N times in a row, keeps the full log of
# every run that fails, and prints what failed: a rare failure is a bug
# to find, and one run in twenty is rare enough to slip past a single
# suite run. By default a round is
#
#   - the cluster tests of the integration package, which start real
#     `brand serve` processes against MinIO (-run, default
#     '^(TestCluster.*|TestEveryNodeRestartedMidStep)$': the cold epoch,
#     the join at the epoch's end, the cluster of four, the resize, the
#     skewed and hostile peers, the partitions, every node restarted
#     mid-step), and
#   - every test of the cluster's packages (-pkgs, default
#     './internal/cluster/...'),
#
# each package's test binary built once, under the race detector, run
# with CI=true (a missing server or tool fails, never skips) and -v, so
# that the log of a failing run names every test that ran.
#
# Usage: scripts/soak.sh [options] N
#
#   -run REGEXP   which integration tests a round runs ('' none)
#   -pkgs 'P...'  the other packages a round runs in full ('' none)
#   -dir DIR      where the logs go (default: a new directory under
#                 ${TMPDIR:-/tmp}, named in the summary)
#   -timeout D    one package's run, as go test -timeout (default 30m)
#   -no-race      without the race detector
#   -stop         stop at the first failing round
#   -keep         keep the logs of passing rounds too (the tests' figures)
#
# The summary (printed, and in DIR/summary.txt) gives the rounds run and
# failed, the longest run of consecutive passing rounds, each failing
# test with the rounds it failed in, any test skipped, and each round's
# time. A round fails if a package's binary exits non-zero, a test is
# skipped, or a package runs no test at all (a -run that matches
# nothing). Failing rounds keep their logs as DIR/round-NNN/PKG.log;
# passing rounds keep only a line in DIR/rounds.txt (and their logs with
# -keep).
#
# With BRAND_TEST_LOGS=DIR in the environment, the cluster tests keep
# every node's whole log, the partition test's at debug level (each chunk
# read from the store named), as DIR/TEST/node-K.log: what a failing
# round's nodes did, not only their warnings.
#
# Examples:
#   scripts/soak.sh 20                                   # the bar: 20 in a row
#   scripts/soak.sh -run '^TestClusterPartitions$' -pkgs '' 20
#   scripts/soak.sh -run '' -pkgs ./internal/cluster/membership/ 200
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."
root=$(pwd)

run='^(TestCluster.*|TestEveryNodeRestartedMidStep)$'
pkgs='./internal/cluster/...'
dir=''
timeout=30m
race=-race
stop=false
keep=false
usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
while [[ $# -gt 0 ]]; do
	case $1 in
	-run) run=$2; shift 2 ;;
	-pkgs) pkgs=$2; shift 2 ;;
	-dir) dir=$2; shift 2 ;;
	-timeout) timeout=$2; shift 2 ;;
	-no-race) race=''; shift ;;
	-stop) stop=true; shift ;;
	-keep) keep=true; shift ;;
	-h | -help | --help) usage ;;
	-*) echo "soak.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[[ $# -eq 1 && $1 =~ ^[1-9][0-9]*$ ]] || usage
rounds=$1
if [[ -z $dir ]]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/brand-soak.XXXXXX")
fi
mkdir -p "$dir/bin"
dir=$(cd "$dir" && pwd)
if [[ -n $race ]] && { [[ $(go env CGO_ENABLED) != 1 ]] || ! command -v "$(go env CC)" >/dev/null 2>&1; }; then
	echo "soak.sh: no C compiler for the race detector; running without -race" >&2
	race=''
fi

# The packages of a round, each with the -run its binary is given:
# integration with -run, the others whole.
declare -a names dirs runs
add() { # add IMPORT-PATH RUN
	local path=$1 pat=$2 rel
	rel=${path#github.com/brandgw/brand}
	names+=("$(echo "${rel#/}" | tr / _)")
	dirs+=("$root$rel")
	runs+=("$pat")
}
if [[ -n $run ]]; then
	scripts/ensure-minio.sh >/dev/null
	add github.com/brandgw/brand/integration "$run"
fi
if [[ -n $pkgs ]]; then
	# Only the packages with tests: go test -c of one without writes
	# nothing.
	# shellcheck disable=SC2086
	while read -r path; do
		add "$path" '.'
	done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' $pkgs)
fi
[[ ${#names[@]} -gt 0 ]] || { echo "soak.sh: nothing to run (-run '' and -pkgs '')" >&2; exit 2; }

echo "soak.sh: building ${#names[@]} test binaries${race:+ (-race)}" >&2
for i in "${!names[@]}"; do
	# shellcheck disable=SC2086
	(cd "${dirs[$i]}" && go test -c $race -o "$dir/bin/${names[$i]}.test" .)
done

export CI=true
declare -A failed_in=() skipped_in=()
failed=0 streak=0 best=0 ran=0
: >"$dir/rounds.txt"
for ((r = 1; r <= rounds; r++)); do
	round=$(printf 'round-%03d' "$r")
	start=$SECONDS
	bad=()
	mkdir -p "$dir/$round"
	for i in "${!names[@]}"; do
		log="$dir/$round/${names[$i]}.log"
		rc=0
		(cd "${dirs[$i]}" && "$dir/bin/${names[$i]}.test" -test.count=1 -test.v -test.timeout "$timeout" -test.run "${runs[$i]}") >"$log" 2>&1 || rc=$?
		# What failed: each --- FAIL line's test (subtests too), the
		# tests running when a timeout panicked, or the exit status.
		tests=$(sed -n 's/^ *--- FAIL: \([^ ]*\).*/\1/p' "$log" | sort -u)
		if grep -q '^panic: test timed out' "$log"; then
			tests+=$'\n'$(sed -n '/^\trunning tests:/,/^$/s/^\t\t\([^ ]*\).*/\1 (timed out)/p' "$log")
		fi
		skips=$(sed -n 's/^ *--- SKIP: \([^ ]*\).*/\1/p' "$log" | sort -u)
		if grep -q '^testing: warning: no tests to run' "$log" || ! grep -q '^=== RUN' "$log"; then
			[[ $rc -ne 0 ]] || rc=1
			tests+=$'\n'"${names[$i]}: no test ran (-run ${runs[$i]})"
		fi
		for s in $skips; do
			skipped_in[$s]+=" $r"
		done
		tests=$(echo "$tests" | sed '/^$/d')
		if [[ $rc -ne 0 ]]; then
			[[ -n $tests ]] || tests="${names[$i]}: exit status $rc, no failing test named (see the log)"
			while read -r t; do
				failed_in[$t]+=" $r"
			done <<<"$tests"
		fi
		if [[ $rc -ne 0 || -n $skips ]]; then
			bad+=("${names[$i]}")
		fi
	done
	ran=$r
	took=$((SECONDS - start))
	if [[ ${#bad[@]} -eq 0 ]]; then
		[[ $keep == true ]] || rm -rf "${dir:?}/$round"
		streak=$((streak + 1))
		echo "$round pass ${took}s" | tee -a "$dir/rounds.txt" >&2
	else
		# The passing packages' logs of a failing round are kept too:
		# what ran beside the failure.
		failed=$((failed + 1))
		streak=0
		echo "$round FAIL ${took}s: ${bad[*]} (logs in $dir/$round)" | tee -a "$dir/rounds.txt" >&2
	fi
	best=$((streak > best ? streak : best))
	if [[ $stop == true && ${#bad[@]} -gt 0 ]]; then
		break
	fi
done

{
	echo "soak: $ran rounds, $((ran - failed)) passed, $failed failed; longest run of consecutive passes $best; the last $streak in a row passed"
	what=()
	[[ -z $run ]] || what+=("the integration tests matching '$run'")
	[[ -z $pkgs ]] || what+=("every test of $pkgs")
	echo "each round: $(IFS=,; echo "${what[*]}" | sed 's/,/ and /')${race:+, under -race}"
	if [[ $failed -gt 0 ]]; then
		echo "failures (test: rounds):"
		for t in "${!failed_in[@]}"; do
			echo "  $t:${failed_in[$t]}"
		done | sort
	fi
	if [[ ${#skipped_in[@]} -gt 0 ]]; then
		echo "skipped (test: rounds), each such round counted as failed:"
		for t in "${!skipped_in[@]}"; do
			echo "  $t:${skipped_in[$t]}"
		done | sort
	fi
	echo "rounds:"
	sed 's/^/  /' "$dir/rounds.txt"
	echo "logs: $dir"
} | tee "$dir/summary.txt"
[[ $failed -eq 0 ]]
