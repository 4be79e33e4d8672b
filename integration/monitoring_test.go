package integration

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/s3backend"
)

const (
	monitoringDir = "../deploy/monitoring"
	alertsFile    = monitoringDir + "/brand-alerts.yml"
	dashboardFile = monitoringDir + "/brand-dashboard.json"
)

// provoked are the alerts whose condition TestMonitoringOnPrometheus
// brings about, and must therefore see active (pending or firing): a
// peer killed, images that do not decode, chunks missing from the store
// (their loads fail, and the batches that need them are answered 502).
// The other alerts' conditions — a slow cluster, a saturated one, a
// cache far from the optimum, a hand-over timing out, memory over budget
// — are not brought about in a test; their signals are required to
// return data, which proves that the series and labels they compare
// exist as written.
var provoked = []string{"BrandPeerDown", "BrandTransformFailing", "BrandChunkLoadsFailing", "BrandRequestsRefused"}

// TestMonitoringOnPrometheus proves deploy/monitoring on a real
// Prometheus: promtool checks the alerting rules; Prometheus, scraping
// three `brand serve` processes every second with the rules loaded,
// watches a cluster serve jobs (one reading whole epochs, one reading
// tensors of imagenet-train over two ranks), a node join it (a membership
// change and its hand-over) and the provoked failures above; then every
// expression of every dashboard panel (Grafana's $__rate_interval taken
// as 5m, $instance as every gateway) and every alert's signal (its expr
// without the comparison on its last line) must return data, and the
// provoked alerts must be active. A fourth gateway, alone (no peers),
// serves the same jobs and failures: every panel returns data for it but
// those of the rows that say they are for clusters only (the
// reproduction: the cluster row showed "No data" on a single gateway
// without saying why), and each of those rows has a panel it leaves
// empty.
//
// Prometheus and promtool come from Debian's prometheus package
// (scripts/ensure-prometheus.sh); without them the test skips, or fails
// with CI=true.
func TestMonitoringOnPrometheus(t *testing.T) {
	prom, promtool := prometheusTools(t)
	if out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	alerts := loadAlerts(t)
	panels := loadDashboard(t)
	for _, name := range provoked {
		if !slices.ContainsFunc(alerts, func(a alertRule) bool { return a.name == name }) {
			t.Fatalf("the provoked alert %s is not in %s", name, alertsFile)
		}
	}

	dir := t.TempDir()
	good, broken := monitoringDatasets(t, dir)
	bin := cmdtest.Build(t, "brand")
	const nodes = 3
	ports := freePorts(t, nodes+1)
	soloPort := ports[nodes]
	ports = ports[:nodes]
	urls := make([]string, nodes)
	procs := make([]*clusterProc, nodes)
	peersFile := filepath.Join(dir, "peers")
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
		procs[k] = &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)),
			args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
				"--dataset", "photos=" + good, "--dataset", "broken=" + broken,
				"--cache-size", "1MiB", "--cache-prefault=false", "--on-bad-image", "skip", "--transform-workers", "1",
				"--peers-file", peersFile, "--advertise", urls[k], "--peers-poll", "200ms", "--leave-timeout", "2s",
				"--log-format", "json", "--shutdown-timeout", "5s", "--index-poll", "0"}}
	}
	promURL := startPrometheus(t, prom, dir, append(slices.Clone(ports), soloPort))
	soloAddr := fmt.Sprintf("127.0.0.1:%d", soloPort)
	solo := &clusterProc{k: nodes, url: "http://" + soloAddr, logPath: filepath.Join(dir, "solo.log"),
		args: []string{"serve", "--listen", soloAddr, "--dataset", "photos=" + good, "--dataset", "broken=" + broken,
			"--cache-size", "1MiB", "--cache-prefault=false", "--on-bad-image", "skip", "--transform-workers", "1",
			"--log-format", "json", "--shutdown-timeout", "5s", "--index-poll", "0"}}
	solo.start(t, bin, os.Environ())
	t.Cleanup(func() { solo.stop(t) })

	// Two nodes, then a third joins: a membership change and its
	// hand-over, under a job that goes on reading. Prometheus scrapes
	// between the steps, so that it sees counters rise rather than find
	// them risen (rate counts no increase before a series' first sample).
	writePeers(t, peersFile, urls[:2])
	startProcs(t, procs[:2], bin, os.Environ(), "")
	waitScraped(t, promURL, append(slices.Clone(urls[:2]), solo.url))
	readEpochs(t, solo.url, "photos", 1, 1, 0, 0, 1, "")
	readEpochs(t, solo.url, "photos", 2, 2, 0, 0, 1, "transform=imagenet-train")
	readEpochs(t, urls[0], "photos", 1, 1, 0, 0, 1, "")
	readEpochs(t, urls[0], "photos", 2, 2, 0, 0, 1, "transform=imagenet-train")
	readEpochs(t, urls[1], "photos", 2, 2, 1, 0, 1, "transform=imagenet-train")
	writePeers(t, peersFile, urls)
	if err := procs[2].launch(bin, os.Environ()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { procs[2].stop(t) })
	readEpochs(t, urls[0], "photos", 1, 1, 0, 1, 1, "")
	waitAgreed(t, urls, map[int]bool{0: true, 1: true, 2: true}, urls, mustMembership(t, urls).Version())
	readEpochs(t, urls[2], "photos", 1, 1, 0, 2, 1, "")
	waitScraped(t, promURL, urls)

	// The provoked failures: batches of a dataset whose chunks are gone
	// (502), requests a client got wrong (400), and a node lost. One of
	// each first, so that their series exist when the rest come.
	provoke := func(n int) {
		for range n {
			for _, base := range []string{urls[0], solo.url} {
				if code := status(t, base+"/epoch/0/batch/0?dataset=broken&batch_size=8"); code != http.StatusBadGateway {
					t.Fatalf("a batch of the dataset without chunks: %d, want 502", code)
				}
			}
			for _, base := range []string{urls[1], solo.url} {
				if code := status(t, base+"/epoch/0/batch/0?dataset=photos&batch_size=0"); code != http.StatusBadRequest {
					t.Fatalf("batch_size=0: %d, want 400", code)
				}
			}
		}
	}
	provoke(1)
	waitScraped(t, promURL, append(slices.Clone(urls), solo.url))
	provoke(20)
	procs[2].kill()

	// Every expression returns data once Prometheus has scraped all this
	// and evaluated the rules; the provoked alerts are active.
	var queries []promQuery
	for _, p := range panels {
		queries = append(queries, p)
	}
	for _, a := range alerts {
		queries = append(queries, promQuery{what: "alert " + a.name + "'s signal", expr: a.signal})
	}
	// The single gateway's view: a panel's queries with $instance the
	// solo's address (its dots match themselves among the others).
	soloExpr := func(q promQuery) string { return strings.ReplaceAll(q.raw, "$instance", soloAddr) }
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var missing []string
		for _, q := range queries {
			n, err := promInstant(promURL, q.expr)
			if err != nil {
				t.Fatalf("%s: %v\n%s", q.what, err, q.expr)
			}
			if n == 0 {
				missing = append(missing, q.what+": "+q.expr)
			}
		}
		for _, q := range panels {
			if clusterOnly(q.row) {
				continue
			}
			if n, err := promInstant(promURL, soloExpr(q)); err != nil || n == 0 {
				missing = append(missing, fmt.Sprintf("%s, on a single gateway (row %q, not for clusters only): %v %s", q.what, q.row, err, soloExpr(q)))
			}
		}
		active := promActiveAlerts(t, promURL)
		for _, name := range provoked {
			if !active[name] {
				missing = append(missing, "alert "+name+" is not active")
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, a := range alerts {
				if slices.Contains(provoked, a.name) && !active[a.name] {
					missing = append(missing, fmt.Sprintf("%s's signal: %s", a.name, promValues(promURL, a.signal)))
				}
			}
			t.Fatalf("2 minutes on, %d of %d expressions and alerts have no data:\n%s\nactive alerts: %v", len(missing), len(queries)+len(provoked), strings.Join(missing, "\n"), active)
		}
		time.Sleep(time.Second)
	}
	// Each row for clusters only has a panel a single gateway leaves
	// empty: else it would not need a cluster.
	empty := map[string]int{}
	for _, q := range panels {
		if !clusterOnly(q.row) {
			continue
		}
		empty[q.row] += 0
		if n, err := promInstant(promURL, soloExpr(q)); err != nil {
			t.Fatalf("%s: %v", q.what, err)
		} else if n == 0 {
			empty[q.row]++
		}
	}
	if len(empty) == 0 {
		t.Errorf("no row of the dashboard says it is for clusters only, though the cluster's panels are empty on a single gateway")
	}
	for row, n := range empty {
		if n == 0 {
			t.Errorf("row %q says it is for clusters only, but a single gateway shows data in every panel of it", row)
		}
	}
	t.Logf("%d dashboard expressions and %d alert signals return data; %s active; a single gateway leaves %v panels empty", len(panels), len(alerts), strings.Join(provoked, ", "), empty)
}

// prometheusTools finds prometheus and promtool: with CI=true a missing
// one fails the test, elsewhere it skips.
func prometheusTools(t *testing.T) (string, string) {
	t.Helper()
	var paths []string
	for _, name := range []string{"prometheus", "promtool"} {
		p, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed for this test (CI=true: failing); scripts/ensure-prometheus.sh installs it", name)
			}
			t.Skipf("%s not found; scripts/ensure-prometheus.sh installs it (Debian's prometheus package)", name)
		}
		paths = append(paths, p)
	}
	return paths[0], paths[1]
}

// alertRule is an alert of the rules file: its expr and signal, the expr
// without the comparison on its last line.
type alertRule struct{ name, expr, signal string }

// lastComparison is an alert expr's last line: a comparison with a number.
var lastComparison = regexp.MustCompile(`\n\s*(>|<|>=|<=|==|!=)\s*[0-9.e+-]+\s*$`)

func loadAlerts(t *testing.T) []alertRule {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			expr := strings.TrimSpace(r.Expr)
			loc := lastComparison.FindStringIndex(expr)
			if loc == nil {
				t.Fatalf("alert %s: its expr does not end with a line comparing it with a number:\n%s", r.Alert, expr)
			}
			out = append(out, alertRule{name: r.Alert, expr: expr, signal: expr[:loc[0]]})
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no alert", alertsFile)
	}
	return out
}

// promQuery is an expression to query and what it is.
// promQuery is a query the test runs: what it is, its expression; for a
// panel's, the title of the row it is under and its expression with
// $instance unreplaced (raw).
type promQuery struct{ what, expr, row, raw string }

// clusterOnly reports whether a dashboard row says its panels need a
// cluster: a single gateway leaves them empty.
func clusterOnly(row string) bool { return strings.Contains(row, "(clusters only") }

// loadDashboard returns every panel expression of the Grafana dashboard,
// its variables given values (every gateway, rates over 5 minutes), and
// checks what Grafana needs of the file: unique panel IDs, a grid
// position each, and every query on the dashboard's Prometheus variable.
func loadDashboard(t *testing.T) []promQuery {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type source struct{ Type, UID string }
	var d struct {
		Title      string
		UID        string
		Templating struct {
			List []struct{ Name, Type string }
		}
		Panels []struct {
			ID         int
			Type       string
			Title      string
			Datasource *source
			GridPos    *struct{ H, W, X, Y int }
			Targets    []struct {
				RefID      string `json:"refId"`
				Expr       string
				Datasource *source
			}
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if d.Title == "" || d.UID == "" || !slices.Contains(vars, "datasource") || !slices.Contains(vars, "instance") {
		t.Fatalf("%s: title %q, uid %q, variables %v: want a title, a uid, and the variables datasource and instance", dashboardFile, d.Title, d.UID, vars)
	}
	vals := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".+")
	ids := map[int]bool{}
	var out []promQuery
	row := ""
	for _, p := range d.Panels {
		if ids[p.ID] || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Fatalf("panel %q: id %d repeated or no grid position", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			row = p.Title
			continue
		}
		if len(p.Targets) == 0 || p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Fatalf("panel %q: no queries, or not on the dashboard's Prometheus (${datasource})", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || q.Datasource == nil || q.Datasource.UID != "${datasource}" {
				t.Fatalf("panel %q: a query without expr, refId or the dashboard's Prometheus: %+v", p.Title, q)
			}
			expr := vals.Replace(q.Expr)
			if strings.Contains(expr, "$") {
				t.Fatalf("panel %q: a variable the test does not know in %s", p.Title, q.Expr)
			}
			out = append(out, promQuery{what: fmt.Sprintf("panel %q query %s", p.Title, q.RefID), expr: expr, row: row,
				raw: strings.ReplaceAll(q.Expr, "$__rate_interval", "5m")})
		}
	}
	return out
}

// monitoringDatasets packs the datasets the cluster serves into local
// stores under dir: photos (192 photos and 4 images that do not decode),
// and broken, whose first chunk is removed after packing.
func monitoringDatasets(t *testing.T, dir string) (good, broken string) {
	t.Helper()
	ctx := context.Background()
	pack := func(name string, tree photos.Tree, bad int) (string, *dataset.Result) {
		src := filepath.Join(dir, name+"-src")
		if err := tree.Write(ctx, src); err != nil {
			t.Fatal(err)
		}
		for i := range bad {
			junk := make([]byte, 2000)
			_, _ = rand.Read(junk)
			base := filepath.Join(src, "n00000000", fmt.Sprintf("bad_%04d", i))
			if err := os.WriteFile(base+".jpg", junk, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(base+".cls", []byte("0"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		storeDir := filepath.Join(dir, name)
		st, err := s3backend.NewLocal(storeDir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := dataset.Pack(ctx, src, st, dataset.PackOptions{ChunkSize: 48 << 10, Shuffle: true, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		return storeDir, res
	}
	good, res := pack("photos", photos.Tree{Samples: 192, MaxSide: 64, Seed: 3}, 4)
	if res.Index.NumChunks() < 6 {
		t.Fatalf("photos: %d chunks; the test wants a cache smaller than the dataset", res.Index.NumChunks())
	}
	broken, res = pack("broken", photos.Tree{Samples: 24, MaxSide: 64, Seed: 4}, 0)
	if res.Index.NumChunks() < 2 {
		t.Fatalf("broken: %d chunks, want several", res.Index.NumChunks())
	}
	for c := range res.Index.NumChunks() {
		if err := os.Remove(filepath.Join(broken, filepath.FromSlash(res.Index.Chunk(c).Key))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(broken, chunkindex.IndexKey)); err != nil {
		t.Fatal(err)
	}
	return good, broken
}

// startPrometheus runs Prometheus on loopback with the alerting rules,
// scraping the gateways on ports every second and evaluating the rules as
// often, until the test ends; it returns its URL.
func startPrometheus(t *testing.T, bin, dir string, ports []int) string {
	t.Helper()
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, p := range ports {
		targets = append(targets, fmt.Sprintf("'127.0.0.1:%d'", p))
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: ['%s']
scrape_configs:
  - job_name: brand
    static_configs:
      - targets: [%s]
`, rules, strings.Join(targets, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 1)[0]
	logPath := filepath.Join(dir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", tail(logPath))
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited (%v):\n%s", err, tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30 s:\n%s", tail(logPath))
		}
	}
}

// waitScraped waits until Prometheus has scraped each of the gateways at
// bases, up, since it was called.
func waitScraped(t *testing.T, promURL string, bases []string) {
	t.Helper()
	since := time.Now()
	deadline := since.Add(30 * time.Second)
	for {
		var r struct {
			Data struct {
				ActiveTargets []struct {
					ScrapeURL  string    `json:"scrapeUrl"`
					Health     string    `json:"health"`
					LastScrape time.Time `json:"lastScrape"`
				} `json:"activeTargets"`
			}
		}
		if err := getJSONInto(promURL+"/api/v1/targets", &r); err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, tg := range r.Data.ActiveTargets {
			for _, b := range bases {
				if tg.ScrapeURL == b+"/metrics" && tg.Health == "up" && tg.LastScrape.After(since) {
					done++
				}
			}
		}
		if done == len(bases) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus has not scraped %v in 30 s: %+v", bases, r.Data.ActiveTargets)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readEpochs reads epochs first to first+n-1 of a dataset through one
// gateway as rank rank of world ranks (16 samples a batch), every batch
// of them, with extra query parameters if any.
func readEpochs(t *testing.T, base, ds string, seed, world, rank, first, n int, extra string) {
	t.Helper()
	q := fmt.Sprintf("dataset=%s&seed=%d&batch_size=16&world=%d&rank=%d", ds, seed, world, rank)
	if extra != "" {
		q += "&" + extra
	}
	for e := first; e < first+n; e++ {
		var info api.EpochInfo
		if err := getJSONInto(fmt.Sprintf("%s/epoch/%d?%s", base, e, q), &info); err != nil {
			t.Fatal(err)
		}
		for m := range info.Batches {
			if code := status(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", base, e, m, q)); code != http.StatusOK {
				t.Fatalf("%s epoch %d batch %d (%s): %d", base, e, m, q, code)
			}
		}
	}
}

// status GETs url, reads the body and returns the status code.
func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// promInstant runs an instant query and returns how many series it gave
// (a scalar counts as one).
func promInstant(base, expr string) (int, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("prometheus: %s", r.Error)
	}
	if r.Data.ResultType != "vector" && r.Data.ResultType != "matrix" {
		return 1, nil
	}
	var series []json.RawMessage
	if err := json.Unmarshal(r.Data.Result, &series); err != nil {
		return 0, err
	}
	return len(series), nil
}

// promValues is an instant query's result as Prometheus gives it, for
// failure messages.
func promValues(base, expr string) string {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// promActiveAlerts returns the alerts pending or firing.
func promActiveAlerts(t *testing.T, base string) map[string]bool {
	t.Helper()
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
	}
	if err := getJSONInto(base+"/api/v1/alerts", &r); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, a := range r.Data.Alerts {
		if a.State == "pending" || a.State == "firing" {
			out[a.Labels["alertname"]] = true
		}
	}
	return out
}
