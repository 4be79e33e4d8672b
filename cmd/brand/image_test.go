package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileShipsTurboJPEG: the container image, which the Kubernetes
// manifests and docker-compose.yml run, is the libjpeg-turbo build made by
// scripts/build-image-binary.sh, the script scripts/test.sh runs too (so
// CI proves the image's build steps without a container engine), on a
// runtime base with glibc whose Debian release is the build stage's (the
// staged libjpeg.so.62 is built against it), as a non-root user.
func TestDockerfileShipsTurboJPEG(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	stages := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
	if len(stages) != 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a runtime stage", len(stages))
	}
	build, runtime := stages[0][1], stages[1][1]
	releases := map[string]string{"bookworm": "debian12", "trixie": "debian13"}
	release := ""
	for codename, distroless := range releases {
		if strings.Contains(build, "-"+codename) {
			release = distroless
		}
	}
	if release == "" || !strings.HasPrefix(runtime, "gcr.io/distroless/base-"+release+":nonroot") {
		t.Errorf("build stage %s, runtime %s: want distroless base (glibc) of the build stage's Debian release, nonroot", build, runtime)
	}
	for _, want := range []string{
		`(?m)^RUN scripts/build-image-binary\.sh /out "\$\{VERSION\}"$`,
		`(?m)^COPY --from=build /out/lib/ /usr/lib/$`,
		`(?m)^COPY --from=build /out/brand /usr/local/bin/brand$`,
		`(?m)^USER nonroot:nonroot$`,
	} {
		if !regexp.MustCompile(want).MatchString(df) {
			t.Errorf("the Dockerfile has no line matching %s", want)
		}
	}
	if strings.Contains(df, "CGO_ENABLED=0") || strings.Contains(df, "go build") {
		t.Error("the Dockerfile builds brand itself; it must run scripts/build-image-binary.sh, which CI runs")
	}
	// The build context holds the script and what it runs.
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, need := range []string{"scripts/build-image-binary.sh", "scripts/install-turbojpeg.sh", "scripts/lib/python.sh", "go.mod", "cmd/brand/main.go"} {
		if dockerIgnored(string(ignore), need) {
			t.Errorf(".dockerignore leaves %s out of the build context, which the build stage needs", need)
		}
	}
	testSh, err := os.ReadFile("../../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*scripts/build-image-binary\.sh `).Match(testSh) {
		t.Error("scripts/test.sh does not run scripts/build-image-binary.sh: CI would not prove the image's build")
	}
}

// dockerIgnored says whether a .dockerignore leaves path out of the build
// context: the last pattern matching the path or one of its parent
// directories decides, a pattern starting with ! bringing it back in.
// It knows the pattern forms this repository's file uses: globs, and a
// leading **/ for any depth.
func dockerIgnored(dockerignore, path string) bool {
	ignored := false
	for line := range strings.Lines(dockerignore) {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		keep := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		for q := path; q != "." && q != "/"; q = filepath.Dir(q) {
			if dockerMatch(p, q) {
				ignored = !keep
				break
			}
		}
	}
	return ignored
}

func dockerMatch(pattern, path string) bool {
	if rest, ok := strings.CutPrefix(pattern, "**/"); ok {
		parts := strings.Split(path, "/")
		for i := range parts {
			if dockerMatch(rest, strings.Join(parts[i:], "/")) {
				return true
			}
		}
		return false
	}
	ok, _ := filepath.Match(pattern, path)
	return ok
}
