// Package scripts holds the repository's helper scripts; its tests run
// them against fake system tools, so they need no root and change nothing
// outside a temporary directory.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTools writes stand-ins for the system tools apt-install.sh calls.
// Each logs its arguments to log; apt-get install records the policy file
// it found (content and exit status) and "installs" prometheus plus a
// dependency that ships its own unit.
func fakeTools(t *testing.T, dir, log string, aptFails bool) string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "dpkg-installed")
	aptExit := "0"
	if aptFails {
		aptExit = "100"
	}
	tools := map[string]string{
		"id":   `echo 1000`,
		"sudo": `echo "sudo $*" >>"$LOG"; exec "$@"`,
		"apt-get": `echo "apt-get $*" >>"$LOG"
case " $* " in *" install "*)
  if [ -e "$NARWHAL_POLICY_RC_D" ]; then sh "$NARWHAL_POLICY_RC_D"; echo "policy-rc.d during install: exit $?" >>"$LOG"; else echo "policy-rc.d during install: missing" >>"$LOG"; fi
  echo "Setting up prometheus (2.42.0+ds-5+b6) ..."
  [ ` + aptExit + ` = 0 ] || { echo "E: Unable to fetch some archives" >&2; exit ` + aptExit + `; }
  printf 'prometheus\nlibnarwhal-helper\n' >>"` + state + `";;
esac`,
		"dpkg-query": `printf 'bash\ncoreutils\n'; cat "` + state + `" 2>/dev/null || true`,
		"dpkg": `echo "dpkg $*" >>"$LOG"
for p in "$@"; do case $p in
  prometheus) printf '/usr/bin/prometheus\n/usr/bin/promtool\n/lib/systemd/system/prometheus.service\n/lib/systemd/system/prometheus@.service\n/etc/init.d/prometheus\n';;
  libnarwhal-helper) printf '/usr/lib/systemd/system/narwhal-helper.socket\n';;
esac; done`,
		"systemctl":   `echo "systemctl $*" >>"$LOG"`,
		"service":     `echo "service $*" >>"$LOG"`,
		"update-rc.d": `echo "update-rc.d $*" >>"$LOG"`,
	}
	for name, body := range tools {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// apt-install.sh says what it installs, forbids service starts while apt
// runs (policy-rc.d exiting 101), puts back the policy that was there, and
// disables every unit the new packages ship (stopping them where systemd
// runs; stopping init scripts where it does not).
func TestAptInstallLeavesNoServiceBehind(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, _ := filepath.Abs("apt-install.sh")
	for _, tc := range []struct {
		name      string
		systemd   bool
		aptFails  bool
		prior     bool // a policy-rc.d was there before
		wantLines []string
		notLines  []string
	}{
		{name: "no init system", prior: true, wantLines: []string{
			"systemctl disable prometheus.service", "systemctl disable narwhal-helper.socket",
			"service prometheus stop", "update-rc.d prometheus disable"},
			notLines: []string{"--now", "prometheus@"}},
		{name: "systemd running", systemd: true, wantLines: []string{
			"systemctl disable --now prometheus.service", "systemctl disable --now narwhal-helper.socket",
			"update-rc.d prometheus disable"},
			notLines: []string{"service prometheus stop"}},
		{name: "apt fails", aptFails: true, prior: true, notLines: []string{"systemctl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			policy := filepath.Join(dir, "policy-rc.d")
			const original = "#!/bin/sh\n# the image's own policy\nexit 0\n"
			if tc.prior {
				if err := os.WriteFile(policy, []byte(original), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			systemdDir := filepath.Join(dir, "run-systemd-system")
			if tc.systemd {
				os.Mkdir(systemdDir, 0o755)
			}
			bin := fakeTools(t, dir, log, tc.aptFails)
			cmd := exec.Command(bash, script, "prometheus")
			aptLog := filepath.Join(dir, "apt.log")
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LOG="+log,
				"NARWHAL_POLICY_RC_D="+policy, "NARWHAL_SYSTEMD_DIR="+systemdDir, "NARWHAL_APT_LOG="+aptLog)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.aptFails {
				t.Fatalf("exit %v, want failure %v:\n%s", err, tc.aptFails, out)
			}
			if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); !tc.aptFails &&
				(len(lines) != 1 || !strings.Contains(lines[0], aptLog)) {
				t.Errorf("an install prints %d lines, want one progress line naming the log %s:\n%s", len(lines), aptLog, out)
			}
			b, _ := os.ReadFile(log)
			a, _ := os.ReadFile(aptLog)
			calls := string(b) + string(a)
			for _, want := range append([]string{
				"installing Debian package(s) prometheus", // says what it installs
				"policy-rc.d during install: exit 101",    // no service may start
				"sudo apt-get update -q",
				"DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus",
				"Setting up prometheus", // apt's output is kept, in the log
			}, tc.wantLines...) {
				if !strings.Contains(calls, want) && !strings.Contains(string(out), want) {
					t.Errorf("missing %q\noutput:\n%s\ncalls:\n%s", want, out, calls)
				}
			}
			for _, not := range tc.notLines {
				if strings.Contains(calls, not) {
					t.Errorf("unexpected %q\ncalls:\n%s", not, calls)
				}
			}
			if tc.aptFails && !strings.Contains(string(out), "E: Unable to fetch") {
				t.Errorf("apt's error is hidden:\n%s", out)
			}
			got, err := os.ReadFile(policy)
			switch {
			case tc.prior && string(got) != original:
				t.Errorf("the original policy-rc.d was not put back: %q %v", got, err)
			case !tc.prior && !os.IsNotExist(err):
				t.Errorf("policy-rc.d left behind: %q", got)
			}
			if _, err := os.Stat(policy + ".apt-install-saved"); !os.IsNotExist(err) {
				t.Errorf("the saved policy copy was left behind")
			}
		})
	}
}

func TestAptInstallNeedsAPackage(t *testing.T) {
	out, err := exec.Command("bash", "apt-install.sh").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "usage:") {
		t.Fatalf("no arguments: %v %s", err, out)
	}
}

// Every apt install in the Makefile goes through apt-install.sh, so none
// hides apt's output or leaves a service running.
func TestMakefileInstallsThroughAptInstall(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	out, err := exec.Command(mk, "-C", "..", "-n", "-B", "promtool").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n promtool: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "scripts/apt-install.sh prometheus") {
		t.Errorf("make promtool does not install through scripts/apt-install.sh:\n%s", out)
	}
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "apt-get") || strings.Contains(line, "apt install") {
			t.Errorf("Makefile:%d calls apt directly (use scripts/apt-install.sh): %s", i+1, strings.TrimSpace(line))
		}
	}
}
