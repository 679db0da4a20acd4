package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Build builds the Go main package pkg (anything "go build" accepts, such as
// "./examples/amping" or a module path) into an executable in a new temporary
// directory, as "go run" does. cleanup removes that directory. The go command
// is looked up in PATH, then in $GOROOT/bin. If ctx is cancelled, the build's
// whole process group is killed.
func Build(ctx context.Context, pkg string) (exe string, cleanup func(), err error) {
	if pkg == "" {
		return "", nil, errors.New("launch: Build: package path is empty")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goCmd = filepath.Join(root, "bin", "go")
		} else {
			return "", nil, fmt.Errorf("launch: Build %s: the go command is not in PATH and GOROOT is not set", pkg)
		}
	}
	dir, err := os.MkdirTemp("", "gexrun-build-")
	if err != nil {
		return "", nil, fmt.Errorf("launch: Build %s: %w", pkg, err)
	}
	cleanup = func() { os.RemoveAll(dir) }
	name := path.Base(strings.TrimRight(filepath.ToSlash(pkg), "/"))
	if name == "." || name == ".." || name == "/" || name == "" {
		name = "main"
	}
	exe = filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", exe, pkg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		cleanup()
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", nil, fmt.Errorf("launch: go build %s: %s", pkg, msg)
	}
	return exe, cleanup, nil
}
