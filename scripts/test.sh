#!/usr/bin/env bash
# test.sh runs every Brand test the way CI does: formatting and vet checks,
# then all packages under the race detector, including the integration tests
# against a real MinIO server that this script installs (once, cached) and
# that the tests start on loopback themselves, then the Python package's
# tests (scripts/test-python.sh).
#
# Needs only Go (and a C compiler for the race detector; without one the
# tests run without -race and say so). With CI=true a missing MinIO fails the
# run instead of skipping the integration tests, and so do missing S3
# clients (boto3, the AWS CLI), which scripts/ensure-s3-clients.sh installs
# from Debian's packages when run as root, a missing Prometheus
# (scripts/ensure-prometheus.sh), and missing root or network-namespace
# tools for the partition tests (scripts/ensure-netns.sh).
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

# cpu_ticks PID prints the CPU time (user and system, in clock ticks) that
# the shell PID's waited-for children have used: /proc's cutime and cstime
# of the shell (a lane's subshell), which count every descendant reaped on
# the way (compilers, test binaries, the brand serve processes they start).
cpu_ticks() {
	local stat
	stat=$(<"/proc/$1/stat") 2>/dev/null || {
		echo 0
		return
	}
	stat=${stat##*) } # the fields after the command's name
	local -a f
	read -r -a f <<<"$stat"
	echo $((f[13] + f[14]))
}
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

# timed NAME CMD...: runs CMD (a function of this script too, whose
# commands therefore end in `|| return`: errexit does not stop a function
# called where its status is tested) and says how long it took, in wall time and
# in CPU time, so that a run's log shows where the suite's 20 minutes go
# (on two cores, the lanes' CPU time is what bounds the whole).
timed() {
	local name=$1 start=$SECONDS rc=0 me=$BASHPID cpu
	shift
	cpu=$(cpu_ticks "$me")
	"$@" || rc=$?
	cpu=$((($(cpu_ticks "$me") - cpu) / hz))
	echo "test.sh: $name: $((SECONDS - start)) s, CPU $cpu s$( ((rc == 0)) || echo ", exit $rc")" >&2
	return "$rc"
}
suite_start=$SECONDS suite_cpu=$(cpu_ticks $$)

# The libjpeg-turbo decoder's library and headers, and a C compiler
# (installed when run as root), first: the race detector needs the
# compiler, and the race build starts beside the other tools below.
turbojpeg=true
timed "tools: install-turbojpeg" scripts/install-turbojpeg.sh || turbojpeg=false

race=-race
if [[ $(go env CGO_ENABLED) != 1 ]] || ! command -v "$(go env CC)" >/dev/null 2>&1; then
	echo "test.sh: no C compiler for the race detector; running without -race" >&2
	race=
fi

# Every go test call states its timeout (go test's own default, 10
# minutes, is too short for a package on a loaded machine and too long
# for a hung one). Each is sized from a run of this suite on a 2-core
# machine with a busy loop on one core beside it (1,554 s in all,
# b7262e0b's successor): the figure is the package's or the call's there,
# the margin what the timeout leaves over it. A loaded machine (load
# average 8-10) has taken 1.9 times an idle run's wall time.
#   lane one, race packages   20m  the longest package, gateway, 136 s: 8.8x
#   lane one, libavcodec      15m  visit 132 s, tensorize 82 s, gateway 80 s, video 73 s: 6.8x
#   lane two, integration     45m  812 s: 3.3x (30m, 2.2x, would leave a machine at 1.9x 1.2x)
#   lane two, libavcodec      20m  84 s: 14x
#   lane three, plain pkgs    20m  the longest package, brand-bench's harness, 169 s: 7x
#   lane three, brand-chart    5m  23 s: 13x
#   lane three, memory        10m  26 s, 15 s, 13 s: 23x
#   lane three, read paths    15m  160–290 s here on 2 shared cores: 3.1x
#   lane three, libjpeg-turbo 10m  123 s for its four calls and the image's build: 4.9x
#   lane three, fuzzing        5m  a target's 6 s and its build: 397 s for eleven, 36 s each: 8x
# (scripts/test-python.sh runs the Python suite under `timeout 20m`:
# 292 s there, 4.1x.)
#
# Three lanes at once: the suite's wall time is the longest lane's. A
# 2-core machine is kept busy by them without overloading it: the
# integration tests' lane (brand serve processes, MinIO, clients) waits
# much of its time, on think times, timeouts and faults it holds.
#
# Which packages run under the race detector: those whose code runs
# goroutines or is called from several at once (the gateway, the cache,
# the cluster, the batch and job stages, the server's parts, the store,
# the client, the S3 face, the index). Without it: the packages whose
# code starts none (the formats, transform, tokenize, seqpack, shuffle,
# balance, planner, importance, the codecs and generators: `go func` in
# none of them; their shared state is raced where the gateway's tests
# drive them) and the two that run brand serve processes, MinIO and
# clients rather than code of their own (integration, and brand-bench's
# harness), and the test-support packages, helpers of tests rather than
# the product. Under the race detector integration and brand-bench took
# most of the suite's time (integration 17.5 of 25 minutes), for code
# raced in-process by the tests of packages gateway and gateway/clustertest
# (clusters, peers, joins and leaves, the S3 face). The timeout bounds a
# hung test.
raced=() plain=()
while read -r pkg; do
	case ${pkg#github.com/brandgw/brand/} in
	integration) ;; # lane two
	cmd/brand-bench | cmd/brand-bench/* | format | format/* | transform | transform/* | tokenize | seqpack | shuffle | balance | planner | importance | internal/gen/* | internal/codec/* | internal/testsupport/*)
		plain+=("$pkg") ;;
	*) raced+=("$pkg") ;;
	esac
done < <(go list ./...)

# While the tools below install (mostly waiting on the network, dpkg and,
# on a machine without it cached, MinIO's build), the lanes' packages
# compile: vet's build and results, and every package the lanes test,
# with its tests and their dependencies (`go list -export` compiles
# without linking: the lanes link their test binaries). The lanes wait
# for it, so that they compile nothing twice (lane one's -p 1 would
# compile one package at a time); a failure here is left for the lanes
# to report. On a cold clean clone the tools took 248 s of the suite
# before any lane started, and lane one used half a core compiling.
prebuild() {
	{
		go vet ./... || true
		go list -test -export -deps -e $race "${raced[@]}" || true
		go list -test -export -deps -e ./integration/ "${plain[@]}" || true
	} >/dev/null 2>&1
}
timed "prebuild, beside the tools' installation" prebuild &
prebuild_pid=$!

timed "tools: ensure-minio" scripts/ensure-minio.sh
# boto3 and the AWS CLI, which the S3 face's integration test runs.
timed "tools: ensure-s3-clients" scripts/ensure-s3-clients.sh
# Pillow, which package transform's tests compare its pipelines with.
timed "tools: ensure-pil" scripts/ensure-pil.sh
# numpy and zstd, which the MDS and Megatron formats' fixture writers use.
timed "tools: ensure-numpy" scripts/ensure-numpy.sh
# DuckDB (node), which writes format/parquet's second writer's fixtures.
timed "tools: ensure-duckdb" scripts/ensure-duckdb.sh
# LanceDB (node, @lancedb/lancedb pinned), Lance's own writer and reader,
# which format/lance's values are compared with.
timed "tools: ensure-lancedb" scripts/ensure-lancedb.sh
# Hugging Face tokenizers (node), the reference package tokenize's
# byte-level BPE is compared with.
timed "tools: ensure-hf-tokenizers" scripts/ensure-hf-tokenizers.sh
# tiktoken (node), the reference package tokenize's tiktoken encodings
# are compared with, and the source of their rank files in the tests.
timed "tools: ensure-tiktoken" scripts/ensure-tiktoken.sh
# SentencePiece, the reference package tokenize's IDs are compared with.
timed "tools: ensure-sentencepiece" scripts/ensure-sentencepiece.sh
# ffmpeg and ffprobe, which make format/video's test videos and read them
# independently.
timed "tools: ensure-ffmpeg" scripts/ensure-ffmpeg.sh
# torch, which the integration test of a Hub-layout Parquet dataset runs
# PyTorch's DataLoader with (scripts/test-python.sh needs it too; it says
# what a missing one means), and torchvision and Pillow, with which
# brand-bench's train smoke test trains a ResNet-18 on the CPU.
# shellcheck source=lib/python.sh
. scripts/lib/python.sh
find_python torch torchvision PIL >/dev/null || apt_install test.sh python3-torch python3-torchvision python3-pil python3-pytest
# Prometheus and promtool, which deploy/monitoring's dashboard and alerts
# are proved with (integration/monitoring_test.go).
timed "tools: ensure-prometheus" scripts/ensure-prometheus.sh
# ip and iptables, with which integration/partition_test.go puts a
# cluster's nodes in network namespaces and cuts the links between them
# (as root; with CI=true a missing tool or missing root fails the test).
timed "tools: ensure-netns" scripts/ensure-netns.sh
# curl, tar and jq, which the READMEs' examples run
# (integration/readmeexamples_test.go).
timed "tools: ensure-readme-tools" scripts/ensure-readme-tools.sh
echo "test.sh: the tools installed or found: $((SECONDS - suite_start)) s" >&2

unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
	echo "gofmt: these files need formatting:" >&2
	echo "$unformatted" >&2
	exit 1
fi

# The optional decoders' libraries (installed when run as root), before
# the lanes, which build with them: where they cannot be installed the
# build without them is all there is, a warning locally and a failure
# with CI=true.
libav=true
if scripts/install-libav.sh; then
	scripts/ensure-pyav.sh
else
	libav=false
fi
if [[ ${CI:-} == true ]] && ! $turbojpeg; then
	echo "test.sh: the libjpeg-turbo decoder could not be installed (CI=true: failing)" >&2
	exit 1
fi
if [[ ${CI:-} == true ]] && ! $libav; then
	echo "test.sh: libavcodec could not be installed (CI=true: failing)" >&2
	exit 1
fi
echo "test.sh: the optional decoders' libraries: $((SECONDS - suite_start)) s" >&2
wait "$prebuild_pid" || true
echo "test.sh: the lanes start: $((SECONDS - suite_start)) s" >&2

# fuzz PKG TARGET [FLAGS...] fuzzes TARGET of package PKG for 6 s, one
# worker. Go 1.26's fuzzing coordinator can report its own -fuzztime
# deadline as the target's failure when it ends while a busy worker is
# mid-input ("context deadline exceeded", go.dev/issue/75804, fixed in Go
# 1.27; once in a suite's run of three lanes here): a run that ends so
# without writing a failing input is said and not counted. A failing
# input written to testdata/fuzz, or any other failure, fails the lane.
fuzz() {
	local pkg=$1 target=$2 out rc=0 before after
	shift 2
	before=$({ find "$pkg/testdata/fuzz/$target" -type f 2>/dev/null || true; } | wc -l)
	out=$(go test -run '^$' -fuzz "^$target\$" -fuzztime 6s -parallel 1 -timeout 5m "$@" "./$pkg" 2>&1) || rc=$?
	printf '%s\n' "$out"
	if ((rc != 0)); then
		after=$({ find "$pkg/testdata/fuzz/$target" -type f 2>/dev/null || true; } | wc -l)
		if ((after == before)) && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
			echo "test.sh: $target: Go's fuzzing stopped on its own deadline with a worker busy (go.dev/issue/75804), no failing input written: not a failure" >&2
			return 0
		fi
	fi
	return "$rc"
}

# Lane one: the packages under the race detector, then the libavcodec
# build's packages under it.
lane_one() {
	timed "lane one: the race detector's packages" go test $race -count=1 -p 1 -timeout 20m "$@" "${raced[@]}"

	# Package transform/video again with its libavcodec decoder (installs
	# Debian's FFmpeg 5.1 -dev packages when run as root), against videos
	# Debian's ffmpeg writes (scripts/ensure-ffmpeg.sh), every frame held to
	# PyAV's decode of it (scripts/ensure-pyav.sh). Where the libraries cannot
	# be installed the build without them (which refuses video) is all there
	# is: a warning locally, a failure with CI=true.
	if $libav; then
		timed "lane one: libavcodec" libav_raced
	fi
}

brand_chart() {
	go vet -C tools/brand-chart ./... || return
	go test -C tools/brand-chart -count=1 -timeout 5m ./... || return
}

fuzz_all() {
	fuzz planner FuzzPlanParams || return
	fuzz internal/s3face/s3proto FuzzRequest || return
	fuzz transform FuzzParseConfig || return
	fuzz transform FuzzImageHeader || return
	# A tokenizer.json seed reaches new branches at once: minimizing each
	# briefly leaves the 6 s to fuzz.
	fuzz tokenize FuzzLoad -fuzzminimizetime 2s || return
	fuzz tokenize FuzzEncode || return
	fuzz format/parquet FuzzSnappyStream || return
	fuzz format/video/mp4 FuzzIndex || return
	fuzz format/parquet FuzzPages -fuzzminimizetime 2s || return
	fuzz format/mds FuzzShards -fuzzminimizetime 2s || return
	fuzz format/megatron FuzzIdx -fuzzminimizetime 2s || return
	# Lance's seeds are whole fixture files of kilobytes: minimizing each
	# by a count of tries leaves the 6 s to fuzz.
	fuzz format/lance FuzzManifest -fuzzminimizetime 20x || return
	fuzz format/lance FuzzFooter -fuzzminimizetime 20x || return
	fuzz format/lance FuzzDeletion -fuzzminimizetime 20x || return
	# The video decoder exists in the libavcodec build alone (where it
	# cannot be installed, the lanes have said so, and failed with
	# CI=true).
	if $libav; then
		fuzz transform/video FuzzDecode -tags brand_libav -fuzzminimizetime 2s || return
	fi
}

libav_raced() {
	go vet -tags brand_libav ./transform/video/ ./internal/batch/tensorize/ ./internal/batch/visit/ ./internal/testsupport/stagetest/ ./gateway/ ./integration/ || return
	go test $race -count=1 -timeout 15m -tags brand_libav ./transform/video/ || return
	# The clip stage's decode of a batch's clips, each frame PyAV's.
	go test $race -count=1 -timeout 15m -tags brand_libav ./internal/batch/tensorize/ || return
	# What the stages, wired as a node wires them (internal/testsupport/stagetest),
	# serve of a clip job over videos lost, damaged or undecodable.
	go test $race -count=1 -timeout 15m -tags brand_libav -run 'Clip|LeRobot|Video|GOP' ./internal/batch/visit/ || return
	# Clip jobs end to end with the decoder, the gateway's (frames equal
	# to PyAV's, a LeRobot dataset's windows); brand serve processes
	# decode them in lane two.
	go test $race -count=1 -timeout 15m -tags brand_libav -run 'Clip|LeRobot|Video' ./gateway/ || return
}

# Lane two: the integration tests, brand serve processes against MinIO
# (its 35 tests one after another), then again those of clip jobs with
# the libavcodec build: MinIO with brand serve processes (store bytes of
# the covering GOPs, a cluster of three, world 1 and 8, a resume at
# another world size), and the README's video section as written
# (TestReadmeVideo: its index, serve, curls and PyTorch loop).
lane_two() {
	# The integration tests mostly wait (on processes, probes, timeouts:
	# about half a core over their run), so the libavcodec build's few run
	# beside them rather than after, off the suite's longest lane; their
	# output follows the package's.
	local av_out av_pid av_rc=0
	if $libav; then
		av_out=$(mktemp)
		timed "lane two: integration, libavcodec" go test -count=1 -timeout 20m -tags brand_libav -run 'Clip|LeRobot|Video' "$@" ./integration/ >"$av_out" 2>&1 &
		av_pid=$!
	fi
	local rc=0
	timed "lane two: integration" go test -count=1 -timeout 45m "$@" ./integration/ || rc=$?
	if $libav; then
		wait "$av_pid" || av_rc=$?
		cat -- "$av_out"
		rm -f -- "$av_out"
	fi
	((rc == 0 && av_rc == 0)) || return $((rc != 0 ? rc : av_rc))
}

# Lane three: go vet, then the other packages without the race detector,
# then the Python package against a real gateway (installs Debian's
# torch when missing; see the script), then the tests that must run
# alone or with another build: memory, and the libjpeg-turbo build; then
# the fuzz targets.
lane_three() {
	timed "lane three: go vet" go vet ./...
	# brand-chart, which draws the benchmark harness's charts, is a module
	# of its own (so that the product's go.mod carries no plotting
	# library): its vet and tests, which draw the harness's golden charts.
	timed "lane three: brand-chart" brand_chart
	timed "lane three: the other packages without the race detector" go test -count=1 -p 1 -timeout 20m "$@" "${plain[@]}"
	timed "lane three: Python" scripts/test-python.sh

	# The tests that measure memory, which the race detector's own
	# allocations would blur and lane one's run skips under it: what a
	# node's stages keep per job, mixture and schedule clients name, held
	# flat over 40,000 batches; what feedback bodies take while they are
	# decoded; what a batch allocates over 2, 20 and 100 sources (under
	# the race detector sync.Pool drops at random, and the figure is
	# noise); and every read path's peak under --memory-limit.
	timed "lane three: memory" go test -count=1 -timeout 10m -run '^TestDistinctMixturesHoldNoMemory$' ./internal/batch/visit/
	timed "lane three: memory (feedback)" go test -count=1 -timeout 10m -run '^TestFeedbackMemory$' ./internal/job/feedback/
	timed "lane three: memory (many sources)" go test -count=1 -timeout 10m -run '^TestManySourcesGarbagePerBatch$' ./gateway/
	# Every read path and the task plans under --memory-limit, a brand
	# serve process's peak (VmHWM) each: 32 requests at once for samples
	# over a 64th of the limit from chunks larger than the cache, for
	# bucket batches and tensors over a 64th of it, and 100 task jobs
	# (issue 98). Here, not in lane two, so that it runs alone
	# in its lane: it writes 900 MB and its figures are a process's peak.
	timed "lane three: memory (read paths)" env BRAND_MEMORY_LANE=1 go test -count=1 -timeout 15m -run '^TestReadPathsWithinTheMemoryLimit$' ./integration/

	# Package transform again with its optional libjpeg-turbo decoder
	# (installs Debian's libjpeg62-turbo-dev when run as root), and the
	# container image's binary built as the Dockerfile builds it, which must
	# name libjpeg-turbo in `brand version`. Where the library cannot be
	# installed the build without it is all there is: a warning locally, a
	# failure with CI=true.
	if $turbojpeg; then
		timed "lane three: libjpeg-turbo" turbojpeg_build
	fi

	# The fuzz targets last, here: with the lanes' packages compiled
	# before they start, this lane ends first without them (a cold clean
	# clone, the lanes starting at 297 s: lane three's steps 439 s, lane
	# two's integration 531 s and then the fuzzing 201 s, the suite's
	# longest lane).
	# Fuzzed for a bounded time beyond their seed corpus (which the run above
	# already checks): the mixture and plan parameters, the S3 face's
	# request parsing (keys, ranges, preconditions, listing parameters), the
	# transform configuration's parser (--transform-config), the image
	# header readers that size a tensor before any pixel is decoded, and the
	# SentencePiece model loader and encoder, the snappy decoder that
	# writes Parquet pages straight into their members, the MP4 index and
	# the video decoder behind it (libavcodec on damaged packets, each
	# input's decoder closed and its C heap given back);
	# and each decoder of data served in place, seeded with decompression
	# bombs of every codec, each input held to its memory bound: Parquet
	# pages of every codec, MDS shards of every codec, Megatron indexes
	# (minimizing an interesting input briefly, so that the bombs' large
	# seeds leave time to fuzz).
	timed "lane three: fuzzing" fuzz_all
}

turbojpeg_build() {
	# TestWorkBound measures the pure-Go decoder alone (StdJPEG, whatever
	# the build), which the plain run above has already done.
	# Without the race detector, as that run runs package transform
	# (it starts no goroutine; the gateway's tests race the stage that
	# runs it).
	go test -count=1 -timeout 10m -tags brand_turbojpeg -skip '^TestWorkBound$' ./transform/ || return
	# The GPU path's wiring, which only a build that cuts JPEGs serves
	# (transform=imagenet-train-gpu): the stage's members and the
	# gateway's batches.
	go test -count=1 -timeout 10m -tags brand_turbojpeg -run '^(TestApplyCutsForGPU|TestCutOverTheTensorsRoom|TestCutBytesServed)$' ./internal/batch/tensorize/ || return
	go test -count=1 -timeout 10m -tags brand_turbojpeg -run '^(TestGPUCutBatches|TestTransformStatuses)$' ./gateway/ || return
	# Without the race detector too: what they check is the build's
	# decoder named at start and in its help, and the race build of
	# every package above transform with the tag is a minute of CPU. With
	# the image's tags, so that the image's build below finds every
	# package it compiles already compiled.
	local tags=brand_turbojpeg
	if $libav; then
		tags=brand_turbojpeg,brand_libav
	fi
	go test -count=1 -timeout 10m -tags "$tags" -run '^(TestStartupNamesDecoder|TestHelpAndUsage)$' ./cmd/brand/ || return
	local image
	image=$(mktemp -d) || return
	scripts/build-image-binary.sh "$image/out" test || return
	rm -rf -- "$image" || return
}

lane_one "$@" &
one_pid=$!
lane_two "$@" &
two_pid=$!
lane_three "$@" &
three_pid=$!
one_rc=0 two_rc=0 three_rc=0
wait "$one_pid" || one_rc=$?
wait "$two_pid" || two_rc=$?
wait "$three_pid" || three_rc=$?
echo "test.sh: the whole suite: $((SECONDS - suite_start)) s, CPU $((($(cpu_ticks $$) - suite_cpu) / hz)) s" >&2
if ((one_rc != 0 || two_rc != 0 || three_rc != 0)); then
	echo "test.sh: failed (lane one — the race detector's packages, the libavcodec build: exit $one_rc; lane two — integration: exit $two_rc; lane three — vet, the other packages without the race detector, Python, memory, the libjpeg-turbo build, fuzzing: exit $three_rc)" >&2
	exit 1
fi
