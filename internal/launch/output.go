package launch

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// maxLine is the longest rank output line forwarded in one piece; longer
// lines are forwarded in pieces that other ranks' lines may separate.
const maxLine = 1 << 20

// output forwards the ranks' output line by line and prints the launcher's
// messages. mu serializes every write to stdout and stderr, so lines from
// different sources never mix.
type output struct {
	label          bool
	stdout, stderr io.Writer

	mu sync.Mutex // guards writes to stdout and stderr

	wg    sync.WaitGroup // forwarders
	fmu   sync.Mutex     // guards files
	files []*os.File     // read ends of the ranks' pipes

	outFiles []*os.File // Config.OutputDir files (mpirun.go), guarded by fmu
}

// say prints "gexrun: line" to stderr.
func (o *output) say(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.stderr, "gexrun: %s\n", line)
}

// forward starts copying f, rank's stdout or stderr, to dst line by line.
func (o *output) forward(f *os.File, rank int, dst io.Writer) {
	o.fmu.Lock()
	o.files = append(o.files, f)
	o.fmu.Unlock()
	var prefix []byte
	if o.label {
		prefix = []byte("[" + strconv.Itoa(rank) + "] ")
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer f.Close()
		br := bufio.NewReaderSize(f, 64<<10)
		var line, buf []byte
		atStart := true // the next piece starts a line
		for {
			chunk, err := br.ReadSlice('\n')
			line = append(line, chunk...)
			if err == bufio.ErrBufferFull && len(line) < maxLine {
				continue
			}
			end := err != nil && err != bufio.ErrBufferFull
			if len(line) > 0 {
				complete := line[len(line)-1] == '\n'
				if !complete && end {
					line = append(line, '\n') // final unterminated line
					complete = true
				}
				buf = buf[:0]
				if atStart {
					buf = append(buf, prefix...)
				}
				buf = append(buf, line...)
				o.mu.Lock()
				dst.Write(buf) // a failing destination must not stall the rank: keep draining
				o.mu.Unlock()
				atStart = complete
				line = line[:0]
			}
			if end {
				return
			}
		}
	}()
}

// wait waits for every forwarder to reach the end of its pipe. Once every
// rank and its process group are gone that is immediate; if some escaped
// descendant still holds a pipe open after limit, the pipe is cut.
func (o *output) wait(limit time.Duration) {
	defer o.closeOutFiles()
	done := make(chan struct{})
	go func() {
		o.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(limit):
	}
	o.fmu.Lock()
	for _, f := range o.files {
		f.SetReadDeadline(time.Now())
	}
	o.fmu.Unlock()
	<-done
}
