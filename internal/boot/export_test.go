package boot

import (
	"io"
	"time"
)

// ConnectForTest is Connect with the process-level effects replaced: dial
// retries for dial, exit is called instead of os.Exit (when it returns, the
// calling goroutine ends), messages go to stderr.
func ConnectForTest(addr string, rank, size int, jobID, host string, dial time.Duration, exit func(int), stderr io.Writer) (Bootstrap, error) {
	return connect(addr, rank, size, jobID, host, connectOpts{dialTimeout: dial, exit: exit, stderr: stderr})
}

// SingletonForTest is Singleton with exit and stderr replaced.
func SingletonForTest(host string, exit func(int), stderr io.Writer) Bootstrap {
	return newSingleton(host, exit, stderr)
}
