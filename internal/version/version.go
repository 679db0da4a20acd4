// Package version names the gexgo release the commands were built from, for
// their --version flag and gexbench's header.
package version

import (
	"runtime"
	"runtime/debug"
)

// Release is the gexgo release of this source tree. A binary installed with
// "go install github.com/gexgo/gexgo/cmd/...@vX.Y.Z" reports the module
// version the go command recorded instead.
const Release = "v0.1.0-dev"

// String is the version line of a command: its name, the gexgo version and
// the Go toolchain, e.g. "gexrun gexgo v0.1.0-dev (go1.26.0)". A VCS revision,
// when the build recorded one, follows the version.
func String(cmd string) string {
	v := Release
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == "github.com/gexgo/gexgo" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	return cmd + " gexgo " + v + rev + " (" + runtime.Version() + ")"
}
