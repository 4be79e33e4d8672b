// Package testsupport is the parent of test support, as net/http's
// httptest is: nothing below it is linked into the server binary.
//
//	miniotest   a pinned MinIO started on loopback for tests and benchmarks
//	catalogtest the catalog's datasets tests of the batch stages and rooms serve from
//	cmdtest     the module's commands built for tests that run them as processes
//	pythontest  the Python 3 with given modules a test runs a reference with
//	golden      a package's golden file, read and written in the one layout
//	promtest    a /metrics body read with Prometheus's own parser (expfmt)
//	s3test      a store in memory, and any store counted, failed and gated
//	gatewaytest gateways started in process, alone or as a cluster, and read
//	hubtest     a package's types held under a number of methods (no hubs)
//	layertest   a package held to its layers: what it must not link, and why
//	netns       test networks of network namespaces, and faults cut into them
//	videotest   the video files the video formats' tests read (ffmpeg, ffprobe)
//	visiontest  image-text samples and the tokens a vision job makes of each
//	stagetest   the batch stages wired as a node wires them, for tests without HTTP
//	jobmodel    a reference model of a job's epochs, cut, balance and table of features
package testsupport
